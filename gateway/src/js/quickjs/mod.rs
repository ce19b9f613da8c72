//! The second JS engine: Tyk's JSVM API on QuickJS (`custom_middleware.engine:
//! "quickjs"`, or `--jsvm-engine quickjs` for APIs that name none).
//!
//! # Why rquickjs
//!
//! rquickjs is the maintained Rust binding of QuickJS (releases every few
//! months, used by AWS's LLRT); it vendors **quickjs-ng**, the actively
//! developed fork of Bellard's QuickJS (ES2023+, regular fixes, a regex
//! engine that polls the interrupt handler). The older `quick-js` crate binds
//! the original engine and is unmaintained.
//!
//! # How it runs
//!
//! [`load`] reads the API's scripts, compiles them once to bytecode
//! ([`api::Program`], shared by every thread) and builds one context to prove
//! they load and define every entry's object, so a user's mistake fails the
//! load and names the field and file. Each worker then builds its own
//! [`api::QjsApi`] per API at the API's first call there (a QuickJS
//! runtime is not `Send`; an API nobody calls costs nothing); one runtime
//! per API and worker makes `--jsvm-memory` a per-context limit and keeps
//! two APIs' globals apart. Per request, a `persistent` context makes one
//! request object whose fields live in Rust slots (`request.rs`), other
//! strategies have `host.js` build it from a few strings (no JSON); the
//! entry runs and the host reads back only the fields a script may change
//! (`answer.rs`).
//!
//! # What the limits guarantee (see `engine.rs`)
//!
//! A call is stopped by QuickJS's interrupt handler once the
//! `--jsvm-timeout` deadline has passed, wherever the time goes: script
//! loops, callbacks of builtins, regular expressions.
//! Memory past `--jsvm-memory` and native stack past [`engine::STACK_LIMIT`]
//! fail the call. Each is a 500; after a timeout or the memory limit the
//! API's state on that thread is rebuilt (globals reset), after a stack
//! overflow it is kept (it is an ordinary `RangeError`). Inline, a call
//! cannot yield: other requests on the same worker wait for it (up to the
//! slice below, or with `--jsvm-threads 0` the timeout); on VM threads they
//! never do.
//!
//! # Where a call runs: inline until it overruns (decided by measurement)
//!
//! Because the interrupt handler reaches everywhere, QuickJS need not pay
//! for a VM thread up front, as boa must. An API starts *inline* on the I/O
//! thread ([`Place::Adaptive`]), each call bounded by a short slice
//! (`--jsvm-inline-budget`, 1 ms) as well as its deadline. The first call
//! that overruns the slice is stopped there, the API moves to VM threads
//! (`vmthread.rs`) on that worker for good, and the call runs again there,
//! from the request as it came (nothing of a stopped call is applied), with
//! what is left of its deadline. The move costs what a timeout costs: that
//! worker's context is rebuilt, so its globals start over. APIs whose
//! scripts call out (`TykMakeHttpRequest`, `TykBatchRequest`: they block)
//! or that have response or virtual-endpoint entries start on VM threads.
//! Measured (`gateway/benches/js_placement.sh`, release, ab -c 10,
//! `--threads 1`, alternated rounds; gateway CPU per request over the
//! native plugin's, median): +11..21 µs inline or starting inline, +44 µs
//! on a VM thread on the worker's core; mean call 19-23 µs against 77 µs. What inline
//! gives up: a native step that never polls the handler (sorting a large
//! array without a comparator, one huge `repeat`; each bounded by
//! `--jsvm-memory`) holds the worker until it ends, once; after the move
//! it holds only the API's VM thread. `--jsvm-inline-budget 0` starts every
//! API on VM threads; `--jsvm-threads 0` keeps every call inline.
//!
//! # Layout
//!
//! - `engine`: the runtime and its limits, native globals, bytecode.
//! - `hostcode`: the host's own JS (scopes, underscore) as bytecode, once.
//! - `api`: one API's state on one thread (`persistent`, `tyk-json`,
//!   `fresh`); a call.
//! - `fresh`: the `fresh` strategy: a context put back before every call.
//! - `snapshot`: the heap region that makes putting it back one copy.
//! - `answer`: the request handed to the script; applying its answer.
//! - `keys`: the answer's property names as atoms, once per context.
//! - `request`: a persistent call's request object, its fields in Rust
//!   slots (an exotic class).
//! - `host.js`: the JS side of a call (builds `request`, dispatches).

mod answer;
mod api;
pub(crate) mod engine;
mod fresh;
mod hostcode;
mod keys;
mod request;
mod snapshot;

use std::cell::{OnceCell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rquickjs::{Context, Runtime};

use crate::config::{ApiSpec, Hook, LoadError, Placement};
use crate::middleware::{
    Chain, ChainFactory, Endpoint, Flow, HostOptions, Middleware, MwError, MwFuture, MwFutureOf,
    MwRequest, MwResponse, ReqMut, ResponseMiddleware,
};

use super::vmthread::{self, RunError, Slot, VmPool};
use super::{tykjson, Strategy};
use crate::stats::RunRecorder;
use api::{Program, QjsApi};

/// Default `--jsvm-inline-budget`: a few hundred ordinary calls' worth,
/// short enough that the one call that overruns it delays the worker's
/// other requests by about as much as a slow upstream read would.
pub const DEFAULT_INLINE_BUDGET: std::time::Duration = std::time::Duration::from_millis(1);

/// `host.js`, compiled into the binary with the prelude.
const HOST_JS: &str = include_str!("host.js");

/// The TykJS prelude both engines run.
const PRELUDE: &str = include_str!("../../../../js/tyk_prelude.js");

/// Loads an API's JS middleware on QuickJS.
pub fn load(spec: &ApiSpec, opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    // The same names and default as the boa host (`super::Strategy`).
    let chosen = match spec.strategy.as_str() {
        "" => opts.jsvm_strategy,
        name => super::Strategy::parse(name)
            .map_err(|m| LoadError::new(&spec.file, "custom_middleware.strategy", m))?,
    };
    let mut scripts = super::sources::read(spec)?;
    // Each file in a scope of its own, as on boa (`js/scope.rs`).
    super::sources::scope(&mut scripts);
    // One full build on the loading thread: top-level code runs and every
    // entry's object is checked, whatever the strategy. A virtual endpoint
    // that cannot build is set aside (its path fails); anything else fails
    // the API's load.
    let (read, program) = super::sources::without_broken(spec, &mut scripts, |scripts| {
        let read = Read::of(scripts);
        let program = compile(spec, opts, chosen, &read).map_err(|e| (e.field, e.message))?;
        QjsApi::new(Arc::new(Program {
            strategy: match program.strategy {
                Strategy::Fresh => Strategy::Persistent,
                other => other,
            },
            ..program.clone()
        }))
        .map_err(|e| (e.field, e.message))?;
        Ok((read, program))
    })?;
    let hooks = read.hooks.clone();
    let program = Arc::new(program);
    // The gateway's choice: inline first unless a script calls out (its
    // blocking calls would overrun the slice), on threads unless
    // `--jsvm-threads 0`. The definition's `placement` overrides it.
    let quiet = read.scripts.iter().all(|(_, _, text)| !calls_out(text));
    let budget = !opts.jsvm_inline_budget.is_zero();
    let (threads, inline_first) = match spec.placement {
        None => (opts.jsvm_threads, budget && quiet),
        Some(Placement::Threads) => (opts.jsvm_threads.max(1), false),
        Some(Placement::Inline) => (0, false),
        Some(Placement::Adaptive) => (opts.jsvm_threads.max(1), budget),
    };
    Ok(Arc::new(QjsFactory {
        program,
        hooks,
        threads,
        inline_first,
        inline_budget: opts.jsvm_inline_budget,
        slots: scripts.slots,
    }))
}

/// True when a script names a global that blocks the thread it runs on
/// (its call waits for another service): such an API starts on VM threads.
/// A script that reaches them without naming them (`this["Tyk" + ...]`)
/// gets the inline refusal (`undefined`, logged) until the API moves.
fn calls_out(script: &str) -> bool {
    script.contains("TykMakeHttpRequest") || script.contains("TykBatchRequest")
}

/// One script file: (path, definition field, text).
type Source = (PathBuf, String, String);

/// An API's scripts in the shape `compile` takes.
struct Read {
    scripts: Vec<Source>,
    /// `(name, field)` per request-phase entry, then per response entry,
    /// then per virtual endpoint: the dispatch array's order.
    entries: Vec<(String, String)>,
    hooks: Vec<Hook>,
    /// How many of `entries` are response entries, then endpoints.
    response: usize,
    endpoints: usize,
    /// `use_session` per endpoint.
    sessions: Vec<bool>,
}

impl Read {
    /// The scripts read (`super::sources`, shared with boa), in this shape.
    fn of(read: &super::sources::ApiScripts) -> Read {
        let scripts = read
            .scripts
            .iter()
            .map(|s| (s.file.clone(), s.field.clone(), s.text.clone()))
            .collect();
        let mut entries = read.entries.clone();
        entries.extend(read.response.iter().cloned());
        entries.extend(read.endpoints.iter().cloned());
        Read {
            scripts,
            entries,
            hooks: read.hooks.clone(),
            response: read.response.len(),
            endpoints: read.endpoints.len(),
            sessions: read.sessions.clone(),
        }
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Compiles the prelude, the scripts, the dispatch array and the host, in
/// phases: check the entries' names, compile the prelude (with underscore's
/// preload when a script uses `_`), each script, the dispatch array, the
/// host; then gather them with the limits into a [`Program`].
fn compile(
    spec: &ApiSpec,
    opts: &HostOptions,
    strategy: Strategy,
    read: &Read,
) -> Result<Program, api::BuildError> {
    let (sources, entries) = (&read.scripts, read.entries.clone());
    let requests = entries.len() - read.response - read.endpoints;
    check_identifiers(&entries)?;
    let internal = |m: String| build_error("custom_middleware", m);
    let rt = Runtime::new().map_err(|e| internal(e.to_string()))?;
    let ctx = Context::full(&rt).map_err(|e| internal(e.to_string()))?;
    ctx.with(|ctx| {
        let internal = |m: String| internal(format!("JS host: {m}"));
        let prelude = engine::compile(&ctx, &prelude_source(sources), "js/tyk_prelude.js")
            .map_err(internal)?;
        let scripts = compile_scripts(&ctx, sources)?;
        let dispatch = dispatch_source(&entries, requests, read.response, &read.sessions);
        let dispatch = engine::compile(&ctx, &dispatch, "<dispatch>").map_err(internal)?;
        let host = engine::compile(&ctx, &host_source(spec), "<host.js>").map_err(internal)?;
        let json = (strategy == Strategy::TykJson).then(|| {
            let names = entries.iter().map(|(n, _)| n.clone()).collect();
            tykjson::Calls::new(
                names,
                &spec.api_id,
                &spec.org_id,
                (!spec.config_data_disabled).then_some(&spec.config_data),
            )
        });
        Ok(Program {
            requests,
            response: read.response,
            json,
            api_id: Arc::from(spec.api_id.as_str()),
            file: Arc::from(spec.file.as_path()),
            prelude,
            scripts,
            dispatch,
            host,
            entries,
            timeout: opts.jsvm_timeout,
            memory: opts.jsvm_memory,
            strategy,
        })
    })
}

fn build_error(field: &str, message: String) -> api::BuildError {
    api::BuildError {
        field: field.to_string(),
        message,
    }
}

/// Every entry's name is a JS identifier (it is pasted into the dispatch).
fn check_identifiers(entries: &[(String, String)]) -> Result<(), api::BuildError> {
    match entries.iter().find(|(name, _)| !is_identifier(name)) {
        Some((name, field)) => Err(build_error(
            field,
            format!("{name:?} is not a JavaScript identifier"),
        )),
        None => Ok(()),
    }
}

/// The prelude, and `void _` after it when a script uses `_`: underscore
/// is then evaluated while the context is built (`tykapi::uses_underscore`).
fn prelude_source(sources: &[Source]) -> String {
    if sources
        .iter()
        .any(|(_, _, t)| crate::js::tykapi::uses_underscore(t))
    {
        format!("{PRELUDE}\n{}", crate::js::tykapi::PRELOAD_UNDERSCORE)
    } else {
        PRELUDE.to_string()
    }
}

/// Each script to bytecode, with its field and file for errors.
fn compile_scripts(
    ctx: &rquickjs::Ctx<'_>,
    sources: &[Source],
) -> Result<Vec<(Vec<u8>, String, String)>, api::BuildError> {
    sources
        .iter()
        .map(|(file, field, text)| {
            let shown = file.display().to_string();
            let code = engine::compile(ctx, text, &shown)
                .map_err(|m| build_error(field, format!("{shown}: does not compile: {m}")))?;
            Ok((code, field.clone(), shown))
        })
        .collect()
}

/// The dispatch array: one function per entry, in `entries` order: request
/// phase, response entries, virtual endpoints (see `host.js`'s `call`).
/// Request and response entries' objects are found once, through their
/// file's scope (`mw`); a virtual endpoint's function is global.
fn dispatch_source(
    entries: &[(String, String)],
    requests: usize,
    response: usize,
    sessions: &[bool],
) -> String {
    let calls: Vec<String> = entries
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            if i < requests {
                format!("function (request, spec) {{ return mw[{i}].ProcessRequest(request, {{}}, spec); }}")
            } else if i < requests + response {
                format!("function (request, spec, response) {{ return mw[{i}].ProcessResponse(response, request, {{}}, spec); }}")
            } else {
                let session = crate::js::vm::session_argument(sessions[i - requests - response]);
                format!("function (request, spec, json) {{ return {n}(JSON.parse(json), {session}, spec); }}")
            }
        })
        .collect();
    // `objects`: each entry's object, for a persistent context's host to
    // call `ProcessRequest` on itself (`request.rs`, `Table::call`).
    format!(
        "(function (mw) {{ var d = [{}]; d.objects = mw; return d; }})({})",
        calls.join(",\n"),
        super::scope::RESOLVE
    )
}

/// `host.js` in a function run at once, with this API's `spec`: it runs
/// before the API's scripts (taking the builtins it uses as they are then)
/// and evaluates to `host`, a function of the dispatch array returning
/// `call`. `config_data` goes through `JSON.parse`, as Tyk's JSON does (a
/// `__proto__` key stays a plain key); with `config_data_disabled` the key
/// is left out, as Tyk's `specToJson` does.
fn host_source(spec: &ApiSpec) -> String {
    let js = |s: &str| serde_json::Value::from(s).to_string();
    let config = if spec.config_data_disabled {
        String::new()
    } else {
        format!(
            ", config_data: JSON.parse({})",
            js(&spec.config_data.to_string())
        )
    };
    format!(
        "(function () {{\nvar spec = {{APIID: {}, OrgID: {}{config}}};\n{HOST_JS}\nreturn host;\n}})()",
        js(&spec.api_id),
        js(&spec.org_id),
    )
}

/// Builds per-worker QuickJS chains for one API.
struct QjsFactory {
    program: Arc<Program>,
    /// The hook of each entry in `program.entries`.
    hooks: Vec<Hook>,
    /// VM threads per worker (`--jsvm-threads`); 0 runs calls inline.
    threads: usize,
    /// Start inline ([`Place::Adaptive`]): no script calls out, and a
    /// budget is set.
    inline_first: bool,
    /// `--jsvm-inline-budget`: the slice of an inline call.
    inline_budget: std::time::Duration,
    /// The definition's virtual endpoints, loaded or set aside.
    slots: Vec<super::sources::Slot>,
}

impl QjsFactory {
    /// What starts this API's VM threads on the calling worker (threads
    /// inherit the worker's core, `affinity.rs`).
    fn pool_maker(&self) -> Box<dyn Fn() -> VmPool<QjsApi>> {
        let (program, threads) = (self.program.clone(), self.threads);
        Box::new(move || {
            // A runtime is not `Send`: each VM thread builds its own.
            let p = program.clone();
            let build: vmthread::Builder<QjsApi> = Arc::new(move || {
                let mut api = QjsApi::unbuilt(p.clone());
                api.ensure_built().map(|()| api)
            });
            let name = format!("gw-js-{}", program.api_id);
            VmPool::new(&name, threads.max(1), program.timeout, build)
        })
    }
}

impl ChainFactory for QjsFactory {
    /// Builds no context: an inline API builds its own at its first call
    /// on this worker, a VM thread when it starts (`VmPool`). The load-time
    /// build proved the scripts compile.
    fn instantiate(&self) -> Result<Chain, MwError> {
        let api = QjsApi::unbuilt(self.program.clone());
        // Only request-phase APIs start inline: a response or endpoint call
        // that overran could not be run again (its inputs are moved).
        let adaptive = self.inline_first && self.program.requests == self.program.entries.len();
        let place = Rc::new(if self.threads == 0 {
            Place::Inline(RefCell::new(api))
        } else if adaptive {
            Place::Adaptive(Adaptive {
                inline: RefCell::new(Some(api)),
                pool: OnceCell::new(),
                budget: self.inline_budget,
                make: self.pool_maker(),
            })
        } else {
            Place::Threads((self.pool_maker())())
        });
        let mut chain = Chain::default();
        for (index, ((name, _), hook)) in self.program.entries.iter().zip(&self.hooks).enumerate() {
            let mw: Box<dyn Middleware> = Box::new(QjsMiddleware {
                name: name.clone(),
                index,
                lends: self.program.json.is_none(),
                place: place.clone(),
                timeout: self.program.timeout,
                runs: None,
            });
            match hook {
                Hook::Pre => chain.pre.push(mw),
                _ => chain.post.push(mw),
            }
        }
        let p = &self.program;
        let first = p.requests + p.response;
        for (index, (name, _)) in p.entries.iter().enumerate().take(first).skip(p.requests) {
            chain.response.push(Box::new(QjsResponse {
                name: name.clone(),
                index,
                place: place.clone(),
                timeout: self.program.timeout,
                runs: None,
            }));
        }
        let endpoints = &p.entries[first..];
        chain.endpoints = super::sources::endpoint_chain(&self.slots, endpoints, |j, name| {
            Box::new(QjsEndpoint {
                name: name.to_string(),
                index: first + j,
                place: place.clone(),
                timeout: self.program.timeout,
                runs: None,
            })
        });
        Ok(chain)
    }
}

/// A response entry on one worker, placed as the request phase.
struct QjsResponse {
    name: String,
    index: usize,
    place: Rc<Place>,
    timeout: std::time::Duration,
    /// The time its calls run on a VM thread.
    runs: Option<RunRecorder>,
}

impl ResponseMiddleware for QjsResponse {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        self.runs = self.place.may_leave().then_some(runs);
    }

    fn call<'a>(&'a self, req: &'a MwRequest, resp: &'a mut MwResponse) -> MwFutureOf<'a, ()> {
        Box::pin(async move {
            let (index, owned_req) = (self.index, req.clone());
            let mut owned = resp.clone();
            let r = self
                .place
                .with(self.timeout, self.runs.as_ref(), move |api| {
                    api.call_response(index, &owned_req, &mut owned)
                        .map(|()| owned)
                })
                .await;
            *resp = r.map_err(|e| e.context(&self.name))?;
            Ok(())
        })
    }
}

/// A virtual endpoint on one worker, placed as the request phase.
struct QjsEndpoint {
    name: String,
    index: usize,
    place: Rc<Place>,
    timeout: std::time::Duration,
    /// The time its calls run on a VM thread.
    runs: Option<RunRecorder>,
}

impl Endpoint for QjsEndpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        self.runs = self.place.may_leave().then_some(runs);
    }

    fn call<'a>(&'a self, req: &'a MwRequest) -> MwFutureOf<'a, MwResponse> {
        Box::pin(async move {
            let (index, owned) = (self.index, req.clone());
            self.place
                .with(self.timeout, self.runs.as_ref(), move |api| {
                    api.call_endpoint(index, &owned)
                })
                .await
                .map_err(|e| e.context(&self.name))
        })
    }
}

/// Where one API's QuickJS calls run on one worker.
enum Place {
    /// On the I/O thread (`--jsvm-threads 0`): a call runs to completion
    /// when first polled, so calls on one worker never overlap and the
    /// borrow is never contended.
    Inline(RefCell<QjsApi>),
    /// On VM threads, as boa's (`vmthread.rs`): the I/O thread hands the
    /// request over and awaits the answer.
    Threads(VmPool<QjsApi>),
    /// Inline, each call within a slice, until one overruns it; then on VM
    /// threads for good (the default for request-phase APIs; see the
    /// module's docs).
    Adaptive(Adaptive),
}

/// [`Place::Adaptive`]'s state.
struct Adaptive {
    /// The inline state; `None` once the API has moved.
    inline: RefCell<Option<QjsApi>>,
    /// The VM threads, once the API has moved.
    pool: OnceCell<VmPool<QjsApi>>,
    /// The slice of an inline call (`--jsvm-inline-budget`).
    budget: std::time::Duration,
    make: Box<dyn Fn() -> VmPool<QjsApi>>,
}

impl Adaptive {
    /// Builds the inline context if the API is still inline and has none.
    fn prepare(&self) -> Result<(), MwError> {
        if self.pool.get().is_some() {
            return Ok(());
        }
        match self.inline.borrow_mut().as_mut() {
            Some(api) => api.ensure_built(),
            None => Ok(()),
        }
    }

    /// Moves the API to VM threads (once; later calls find the pool).
    fn migrate(&self, entry: &str) -> &VmPool<QjsApi> {
        self.pool.get_or_init(|| {
            self.inline.borrow_mut().take();
            tracing::warn!(
                "{entry}: a call ran past the inline budget ({:?}); this API's scripts now run on VM threads on this worker (their globals start over)",
                self.budget
            );
            (self.make)()
        })
    }
}

impl Place {
    /// True when calls may run on a VM thread (now or after a move).
    fn may_leave(&self) -> bool {
        !matches!(self, Place::Inline(_))
    }

    /// Runs `f` on the API's state: at once inline, or on a VM thread
    /// within `timeout` (the response phase and virtual endpoints; the
    /// request phase has its own path, which hands the request over
    /// without a copy); a job's own time there goes to `runs`.
    async fn with<T, F>(
        &self,
        timeout: std::time::Duration,
        runs: Option<&RunRecorder>,
        f: F,
    ) -> Result<T, MwError>
    where
        T: Send + 'static,
        F: FnOnce(&mut QjsApi) -> Result<T, MwError> + Send + 'static,
    {
        let pool = match self {
            Place::Inline(api) => return f(&mut api.borrow_mut()),
            Place::Threads(pool) => pool,
            // Not built for APIs with these phases (`instantiate`); served
            // where the API is, should that change.
            Place::Adaptive(a) => match (a.pool.get(), a.inline.borrow_mut().as_mut()) {
                (Some(pool), _) => pool,
                (None, Some(api)) => return f(api),
                (None, None) => return Err(MwError::internal("the JS state is gone")),
            },
        };
        let deadline = Instant::now() + timeout;
        // `f` keeps its own clock (`QjsApi::with`), started on the thread.
        let job = move |slot: &mut Slot<QjsApi>, _: Instant| {
            let (r, spent) = match slot.get() {
                Ok(api) => {
                    let r = f(api);
                    (r, api.is_spent())
                }
                Err(e) => (Err(e), false),
            };
            if spent {
                slot.discard();
            }
            r
        };
        match pool.run(deadline, runs, job).await {
            Ok(r) => r,
            Err(RunError::Timeout) => Err(MwError::timed_out(format!(
                "stopped after the jsvm timeout ({timeout:?})"
            ))),
            Err(RunError::Unavailable(m)) => Err(MwError::internal(m)),
            // QuickJS threads are never armed (its heap has its own limit).
            Err(RunError::Parked(held)) => Err(MwError::out_of_memory(format!(
                "its JS thread stopped in the allocator, holding {}",
                crate::js::memory::mib(held)
            ))),
        }
    }
}

/// One middleware entry on one worker.
struct QjsMiddleware {
    name: String,
    index: usize,
    /// Runs on a lent request (every strategy but `tyk-json`): may run in
    /// a chain run in place.
    lends: bool,
    place: Rc<Place>,
    timeout: std::time::Duration,
    /// The time its calls run on a VM thread.
    runs: Option<RunRecorder>,
}

impl QjsMiddleware {
    /// The call on a VM thread, answered by `deadline` (counted from when
    /// the request reached the middleware, so a wait for the API's busy
    /// thread is inside it, as for boa).
    async fn on_thread(
        &self,
        pool: &VmPool<QjsApi>,
        req: &mut MwRequest,
        deadline: Instant,
    ) -> Result<Flow, MwError> {
        let owned = super::take_request(req);
        let index = self.index;
        let job = move |slot: &mut Slot<QjsApi>, deadline: Instant| {
            let mut req = owned;
            let (r, spent) = match slot.get() {
                Ok(api) => {
                    let r = api.call_until(index, ReqMut::Owned(&mut req), deadline);
                    (r, api.is_spent())
                }
                Err(e) => (Err(e), false),
            };
            if spent {
                // A stopped call: the thread builds the next state right
                // after this answer, off the next request's path.
                slot.discard();
            }
            (req, r)
        };
        match pool.run(deadline, self.runs.as_ref(), job).await {
            Ok((back, r)) => {
                *req = back;
                r
            }
            // The interrupt handler stops QuickJS at the deadline, so this
            // is a wait for the thread that outlasted it.
            Err(RunError::Timeout) => Err(MwError::timed_out(format!(
                "stopped after the jsvm timeout ({:?})",
                self.timeout
            ))),
            Err(RunError::Unavailable(m)) => Err(MwError::internal(m)),
            // QuickJS threads are never armed (its heap has its own limit).
            Err(RunError::Parked(held)) => Err(MwError::out_of_memory(format!(
                "its JS thread stopped in the allocator, holding {}",
                crate::js::memory::mib(held)
            ))),
        }
    }
}

impl QjsMiddleware {
    /// An adaptive API's call inline, within the slice: its answer, or
    /// `None` when the slice stopped it before its own deadline (a stopped
    /// call changed nothing). The API must still be inline.
    fn in_slice(
        &self,
        a: &Adaptive,
        req: ReqMut<'_, '_>,
        deadline: Instant,
    ) -> Option<Result<Flow, MwError>> {
        let mut inline = a.inline.borrow_mut();
        let api = inline.as_mut().expect("inline until the pool exists");
        let slice_end = (Instant::now() + a.budget).min(deadline);
        let r = api.call_until(self.index, req, slice_end);
        // Stopped at the slice, not at the call's own deadline: move.
        let moved = api.take_interrupted() && Instant::now() < deadline;
        (!moved).then_some(r)
    }
}

impl Middleware for QjsMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        self.runs = self.place.may_leave().then_some(runs);
    }

    /// Inline for good (`--jsvm-threads 0`, `placement: inline`), a call
    /// answers before it returns, and runs on a lent request unless the
    /// API is `tyk-json`.
    fn never_waits(&self) -> bool {
        self.lends && matches!(&*self.place, Place::Inline(_))
    }

    fn call_now(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        self.call_or_defer(req).unwrap_or_else(|| {
            let e = MwError::internal("a call that has to be awaited was run in place");
            Err(e.context(&self.name))
        })
    }

    /// Adaptive (inline until a call overruns its slice): a chain that
    /// starts with it runs in place until the API moves.
    fn defers(&self) -> bool {
        self.lends && matches!(&*self.place, Place::Adaptive(_))
    }

    fn in_place_now(&self) -> bool {
        match &*self.place {
            Place::Inline(_) => true,
            Place::Adaptive(a) => a.pool.get().is_none(),
            Place::Threads(_) => false,
        }
    }

    /// The call inline; a call the slice stopped (it changed nothing)
    /// moves the API and defers, and the awaited run ([`Middleware::call`])
    /// sends it to its VM thread, with a deadline of its own (the slice, at
    /// most `--jsvm-inline-budget`, is not taken from it).
    fn call_or_defer(&self, req: ReqMut<'_, '_>) -> Option<Result<Flow, MwError>> {
        let a = match &*self.place {
            Place::Inline(api) => {
                let r = api.borrow_mut().call(self.index, req);
                return Some(r.map_err(|e| e.context(&self.name)));
            }
            Place::Adaptive(a) if a.pool.get().is_none() => a,
            _ => return None,
        };
        // The context is built (at the API's first call on this worker, or
        // after a stopped call discarded it) before the call's time
        // starts, as a VM thread's is (`vmthread.rs`, `built`): a build
        // taking the slice would move the API at once.
        if let Err(e) = a.prepare() {
            return Some(Err(e.context(&self.name)));
        }
        let deadline = Instant::now() + self.timeout;
        match self.in_slice(a, req, deadline) {
            Some(r) => Some(r.map_err(|e| e.context(&self.name))),
            None => {
                a.migrate(&self.name);
                None
            }
        }
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        // Inline (for good, or an adaptive API not moved yet), the usual
        // call answers before it returns: no future is built (nor boxed,
        // moved and polled) for it. A call the slice stopped moved the
        // API (`call_or_defer`) and runs again on its VM thread, as a
        // deferred call run in place does.
        if self.in_place_now() {
            if let Some(r) = self.call_or_defer(ReqMut::Owned(req)) {
                return MwFuture::ready(r);
            }
        }
        MwFuture::pending(async move {
            let deadline = Instant::now() + self.timeout;
            let r = match &*self.place {
                Place::Inline(api) => api.borrow_mut().call(self.index, ReqMut::Owned(req)),
                Place::Threads(pool) => self.on_thread(pool, req, deadline).await,
                // Moved (`migrate` finds the pool it made).
                Place::Adaptive(a) => self.on_thread(a.migrate(&self.name), req, deadline).await,
            };
            r.map_err(|e| e.context(&self.name))
        })
    }
}
