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
//! [`api::QjsApi`] per API (a QuickJS runtime is not `Send`); one runtime
//! per API and worker makes `--jsvm-memory` a per-context limit and keeps
//! two APIs' globals apart. Per request, `host.js` builds Tyk's request
//! object from a few strings the host passes (no JSON), runs the entry and
//! the host reads back only the fields a script may change (`answer.rs`).
//!
//! # What the limits guarantee (see `engine.rs`)
//!
//! A call runs on the API's VM thread (`vmthread.rs`, as boa's; inline on
//! the I/O thread with `--jsvm-threads 0`) and is stopped by QuickJS's
//! interrupt handler once the `--jsvm-timeout` deadline has passed, wherever
//! the time goes: script loops, callbacks of builtins, regular expressions.
//! Memory past `--jsvm-memory` and native stack past [`engine::STACK_LIMIT`]
//! fail the call. Each is a 500; after a timeout or the memory limit the
//! API's state on that thread is rebuilt (globals reset), after a stack
//! overflow it is kept (it is an ordinary `RangeError`). Inline, a call
//! cannot yield: other requests on the same worker wait for it (up to the
//! timeout); on VM threads they never do.
//!
//! # Layout
//!
//! - `engine`: the runtime and its limits, native globals, bytecode.
//! - `api`: one API's state on one thread (`persistent`, `tyk-json`,
//!   `fresh`); a call.
//! - `answer`: the request handed to the script; applying its answer.
//! - `host.js`: the JS side of a call (builds `request`, dispatches).

mod answer;
mod api;
mod engine;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rquickjs::{Context, Runtime};

use crate::config::{ApiSpec, Hook, LoadError};
use crate::middleware::{
    Chain, ChainFactory, Endpoint, Flow, HostOptions, Middleware, MwError, MwFuture, MwFutureOf,
    MwRequest, MwResponse, ResponseMiddleware,
};

use super::vmthread::{self, RunError, Slot, VmPool};
use super::{tykjson, Strategy};
use api::{Program, QjsApi};

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
    let read = read_sources(spec)?;
    let hooks = read.hooks.clone();
    let program = compile(spec, opts, chosen, &read)
        .map_err(|e| LoadError::new(&spec.file, e.field, e.message))?;
    let program = Arc::new(program);
    // One full build on the loading thread: top-level code runs and every
    // entry's object is checked, whatever the strategy.
    QjsApi::new(Arc::new(Program {
        strategy: match program.strategy {
            Strategy::Fresh => Strategy::Persistent,
            other => other,
        },
        ..(*program).clone()
    }))
    .map_err(|e| LoadError::new(&spec.file, e.field, e.message))?;
    Ok(Arc::new(QjsFactory {
        program,
        hooks,
        file: spec.file.clone(),
        threads: opts.jsvm_threads,
    }))
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
}

/// Reads each distinct script once (`super::sources`, shared with boa).
fn read_sources(spec: &ApiSpec) -> Result<Read, LoadError> {
    let mut read = super::sources::read(spec)?;
    // Each file in a scope of its own, as on boa (`js/scope.rs`).
    super::sources::scope(&mut read);
    let scripts = read
        .scripts
        .into_iter()
        .map(|s| (s.file, s.field, s.text))
        .collect();
    let (response, endpoints) = (read.response.len(), read.endpoints.len());
    let mut entries = read.entries;
    entries.extend(read.response);
    entries.extend(read.endpoints);
    Ok(Read {
        scripts,
        entries,
        hooks: read.hooks,
        response,
        endpoints,
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Compiles the prelude, the scripts, the dispatch array and the host.
fn compile(
    spec: &ApiSpec,
    opts: &HostOptions,
    strategy: Strategy,
    read: &Read,
) -> Result<Program, api::BuildError> {
    let (sources, entries) = (&read.scripts, read.entries.clone());
    let requests = entries.len() - read.response - read.endpoints;
    let fail = |field: &str, message: String| api::BuildError {
        field: field.to_string(),
        message,
    };
    for (name, field) in &entries {
        if !is_identifier(name) {
            return Err(fail(
                field,
                format!("{name:?} is not a JavaScript identifier"),
            ));
        }
    }
    let rt = Runtime::new().map_err(|e| fail("custom_middleware", e.to_string()))?;
    let ctx = Context::full(&rt).map_err(|e| fail("custom_middleware", e.to_string()))?;
    ctx.with(|ctx| {
        let internal = |m: String| fail("custom_middleware", format!("JS host: {m}"));
        // Scripts that use `_` get underscore evaluated with the prelude,
        // while the context is built (`tykapi::uses_underscore`).
        let prelude_source = if sources.iter().any(|(_, _, t)| crate::js::tykapi::uses_underscore(t)) {
            format!("{PRELUDE}\n{}", crate::js::tykapi::PRELOAD_UNDERSCORE)
        } else {
            PRELUDE.to_string()
        };
        let prelude =
            engine::compile(&ctx, &prelude_source, "js/tyk_prelude.js").map_err(internal)?;
        let mut scripts = Vec::new();
        for (file, field, text) in sources {
            let shown = file.display().to_string();
            let code = engine::compile(&ctx, text, &shown)
                .map_err(|m| fail(field, format!("{shown}: does not compile: {m}")))?;
            scripts.push((code, field.clone(), shown));
        }
        // One function per entry, in `entries` order: request phase,
        // response entries, virtual endpoints (see `host.js`'s `call`).
        // Request and response entries' objects are found once, through
        // their file's scope (`mw`); a virtual endpoint's function is global.
        let calls: Vec<String> = entries
            .iter()
            .enumerate()
            .map(|(i, (n, _))| {
                if i < requests {
                    format!("function (request, spec) {{ return mw[{i}].ProcessRequest(request, {{}}, spec); }}")
                } else if i < requests + read.response {
                    format!("function (request, spec, response) {{ return mw[{i}].ProcessResponse(response, request, {{}}, spec); }}")
                } else {
                    format!("function (request, spec, json) {{ return {n}(JSON.parse(json), {{}}, spec); }}")
                }
            })
            .collect();
        let dispatch = format!(
            "(function (mw) {{ return [{}]; }})({})",
            calls.join(",\n"),
            super::scope::RESOLVE
        );
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

/// `host.js` wrapped in a function of the dispatch array, with this API's
/// `spec`. `config_data` goes through `JSON.parse`, as Tyk's JSON does
/// (a `__proto__` key stays a plain key); with `config_data_disabled` the
/// key is left out, as Tyk's `specToJson` does.
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
        "(function (dispatch) {{\nvar spec = {{APIID: {}, OrgID: {}{config}}};\n{HOST_JS}\nreturn call;\n}})",
        js(&spec.api_id),
        js(&spec.org_id),
    )
}

/// Builds per-worker QuickJS chains for one API.
struct QjsFactory {
    program: Arc<Program>,
    /// The hook of each entry in `program.entries`.
    hooks: Vec<Hook>,
    file: PathBuf,
    /// VM threads per worker (`--jsvm-threads`); 0 runs calls inline.
    threads: usize,
}

impl ChainFactory for QjsFactory {
    fn instantiate(&self) -> Result<Chain, MwError> {
        let fail = |e: api::BuildError| {
            MwError::not_loaded(format!(
                "{}: {}: {}",
                self.file.display(),
                e.field,
                e.message
            ))
        };
        // Built here whatever the placement: a worker that cannot build the
        // API's state fails to start with the file and field named.
        let api = QjsApi::new(self.program.clone()).map_err(fail)?;
        let place = Rc::new(if self.threads == 0 {
            Place::Inline(RefCell::new(api))
        } else {
            // A runtime is not `Send`: each VM thread builds its own.
            drop(api);
            let program = self.program.clone();
            let build: vmthread::Builder<QjsApi> = Arc::new(move || {
                QjsApi::new(program.clone()).map_err(|e| {
                    MwError::not_loaded(format!(
                        "building the JS context failed: {}: {}",
                        e.field, e.message
                    ))
                })
            });
            let name = format!("gw-js-{}", self.program.api_id);
            Place::Threads(VmPool::new(&name, self.threads, build))
        });
        let mut chain = Chain::default();
        for (index, ((name, _), hook)) in self.program.entries.iter().zip(&self.hooks).enumerate() {
            let mw: Box<dyn Middleware> = Box::new(QjsMiddleware {
                name: name.clone(),
                index,
                place: place.clone(),
                timeout: self.program.timeout,
            });
            match hook {
                Hook::Pre => chain.pre.push(mw),
                _ => chain.post.push(mw),
            }
        }
        let p = &self.program;
        for (index, (name, _)) in p.entries.iter().enumerate().skip(p.requests) {
            if index < p.requests + p.response {
                chain.response.push(Box::new(QjsResponse {
                    name: name.clone(),
                    index,
                    place: place.clone(),
                    timeout: self.program.timeout,
                }));
            } else {
                chain.endpoints.push(Box::new(QjsEndpoint {
                    name: name.clone(),
                    index,
                    place: place.clone(),
                    timeout: self.program.timeout,
                }));
            }
        }
        Ok(chain)
    }
}

/// A response entry on one worker, placed as the request phase.
struct QjsResponse {
    name: String,
    index: usize,
    place: Rc<Place>,
    timeout: std::time::Duration,
}

impl ResponseMiddleware for QjsResponse {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, req: &'a MwRequest, resp: &'a mut MwResponse) -> MwFutureOf<'a, ()> {
        Box::pin(async move {
            let (index, owned_req) = (self.index, req.clone());
            let mut owned = resp.clone();
            let r = self
                .place
                .with(self.timeout, move |api| {
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
}

impl Endpoint for QjsEndpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, req: &'a MwRequest) -> MwFutureOf<'a, MwResponse> {
        Box::pin(async move {
            let (index, owned) = (self.index, req.clone());
            self.place
                .with(self.timeout, move |api| api.call_endpoint(index, &owned))
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
    /// On VM threads (the default), as boa's (`vmthread.rs`): the I/O
    /// thread hands the request over and awaits the answer.
    Threads(VmPool<QjsApi>),
}

impl Place {
    /// Runs `f` on the API's state: at once inline, or on a VM thread
    /// within `timeout` (the response phase and virtual endpoints; the
    /// request phase has its own path, which hands the request over
    /// without a copy).
    async fn with<T, F>(&self, timeout: std::time::Duration, f: F) -> Result<T, MwError>
    where
        T: Send + 'static,
        F: FnOnce(&mut QjsApi) -> Result<T, MwError> + Send + 'static,
    {
        match self {
            Place::Inline(api) => f(&mut api.borrow_mut()),
            Place::Threads(pool) => {
                let deadline = Instant::now() + timeout;
                let job = move |slot: &mut Slot<QjsApi>| {
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
                match pool.run(deadline, job).await {
                    Ok(r) => r,
                    Err(RunError::Timeout) => Err(MwError::timed_out(format!(
                        "stopped after the jsvm timeout ({timeout:?})"
                    ))),
                    Err(RunError::Unavailable(m)) => Err(MwError::internal(m)),
                }
            }
        }
    }
}

/// One middleware entry on one worker.
struct QjsMiddleware {
    name: String,
    index: usize,
    place: Rc<Place>,
    timeout: std::time::Duration,
}

impl QjsMiddleware {
    async fn on_thread(&self, pool: &VmPool<QjsApi>, req: &mut MwRequest) -> Result<Flow, MwError> {
        // The deadline counts from here, so a wait for the API's busy
        // thread is inside it (as for boa).
        let deadline = Instant::now() + self.timeout;
        let owned = super::take_request(req);
        let index = self.index;
        let job = move |slot: &mut Slot<QjsApi>| {
            let mut req = owned;
            let (r, spent) = match slot.get() {
                Ok(api) => (api.call_until(index, &mut req, deadline), api.is_spent()),
                Err(e) => (Err(e), false),
            };
            if spent {
                // A stopped call: the thread builds the next state right
                // after this answer, off the next request's path.
                slot.discard();
            }
            (req, r)
        };
        match pool.run(deadline, job).await {
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
        }
    }
}

impl Middleware for QjsMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        Box::pin(async move {
            let r = match &*self.place {
                Place::Inline(api) => api.borrow_mut().call(self.index, req),
                Place::Threads(pool) => self.on_thread(pool, req).await,
            };
            r.map_err(|e| e.context(&self.name))
        })
    }
}
