//! The JS middleware host (`driver: "otto"`, `"goja"` or `"javascript"`):
//! Tyk's JSVM API on boa_engine.
//!
//! # How it runs
//!
//! [`load`] reads an API's scripts and builds its context once on the loading
//! thread, so every error a user can fix (a file that cannot be read, a script
//! that does not compile or throws at top level, a `name` the scripts do not
//! define) fails that API's load and names the field and file. Each worker
//! thread then builds its own context per API in
//! [`ChainFactory::instantiate`]: boa's `Context` is not `Send`, and one
//! context per API keeps two APIs' globals (`var mw`) apart. Per request the
//! host builds the `request` object natively (`request.rs`; its object-valued
//! fields only when the script first reads them), runs a dispatch
//! expression compiled at build time, and reads back only the fields a script
//! may change: no parsing, no fresh context, no JSON text.
//!
//! # What `--jsvm-timeout` guarantees
//!
//! A call runs inline on the worker thread, sliced by boa's instruction
//! budget (`budget.rs`). At each slice boundary (every `budget::SLICE_BUDGET` cost
//! units, tens of microseconds of a tight loop) the host yields to the
//! worker's runtime, so the worker keeps serving other connections and other
//! APIs while a long script runs, and checks the deadline. Hence:
//!
//! - A call whose time is spent in script code run by the main interpreter
//!   loop (loops, JS-to-JS calls, recursion) is stopped no later than the
//!   timeout plus one slice, and answered 500. Its context is then discarded
//!   and rebuilt (top-level code runs again) for the next request, because a
//!   VM stopped mid-frame cannot be resumed safely. Script globals therefore
//!   reset after a timeout.
//! - The deadline counts from when the request reaches the middleware,
//!   including any wait for the same API's context on the same worker (one
//!   call at a time per context): a request queued behind a runaway script is
//!   also answered by its own deadline.
//! - Unbounded recursion stops at depth 512 and a single frame's loops at
//!   10^8 iterations, each an uncatchable error (a 500, context kept). The
//!   iteration limit is what bounds a loop inside a callback run by a native
//!   builtin (`arr.forEach(fn)`, `sort`, `replace`), which boa runs in a
//!   nested loop that cannot yield: there the bound is iterations, not time.
//! - Runaway allocation: at each slice boundary the call is stopped once the
//!   process's peak RSS has grown 256 MiB since the call's first yield. A
//!   single builtin that allocates in one step (`"x".repeat(1e9)`) cannot be
//!   interrupted; nor can one long native operation (a catastrophic regex).
//!
//! The hot path cost of all this is boa's per-instruction budget counter and
//! one lock of an uncontended async mutex; a call that finishes in its first
//! slice never reads the clock.
//!
//! # Layout
//!
//! - `prelude`: the TykJS prelude (`js/tyk_prelude.js`) and native globals.
//! - `request`: the MiniRequestObject, built per call; applying the answer.
//! - `vm`: one API's context on one worker; build and call.
//! - `budget`: the slice guard that enforces the timeout.

mod budget;
mod prelude;
pub mod quickjs;
mod request;
mod vm;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{ApiSpec, Hook, JsEngine, LoadError};
use crate::middleware::{
    Chain, ChainFactory, HostOptions, Middleware, MwError, MwFuture, MwRequest,
};

use vm::{CallError, ScriptFile, Sources, Vm};

/// Loads an API's JS middleware: reads the scripts and builds one context to
/// prove they compile and define every entry's object.
pub fn load(spec: &ApiSpec, opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    if spec.engine.unwrap_or(opts.jsvm_engine) == JsEngine::QuickJs {
        return quickjs::load(spec, opts);
    }
    let mut scripts: Vec<ScriptFile> = Vec::new();
    let mut entries = Vec::new();
    let mut hooks = Vec::new();
    for hook in [Hook::Pre, Hook::Post] {
        for e in spec.entries(hook) {
            // `e.index` counts disabled entries too: the entry the user wrote.
            let field = format!("custom_middleware.{}[{}]", hook.as_str(), e.index);
            let file = PathBuf::from(&e.path);
            if !scripts.iter().any(|s| s.file == file) {
                let text = std::fs::read_to_string(&file).map_err(|err| {
                    LoadError::new(
                        &spec.file,
                        format!("{field}.path"),
                        format!("cannot read {}: {err}", file.display()),
                    )
                })?;
                scripts.push(ScriptFile {
                    file,
                    field: format!("{field}.path"),
                    text,
                });
            }
            entries.push((e.name.clone(), format!("{field}.name")));
            hooks.push(hook);
        }
    }
    let sources = Arc::new(Sources {
        api_id: spec.api_id.clone(),
        org_id: spec.org_id.clone(),
        config_data: spec.config_data.clone(),
        scripts,
        entries,
        timeout: opts.jsvm_timeout,
    });
    Vm::build(&sources).map_err(|e| LoadError::new(&spec.file, e.field, e.message))?;
    Ok(Arc::new(JsFactory {
        sources,
        hooks,
        timeout: opts.jsvm_timeout,
        file: spec.file.clone(),
    }))
}

/// Builds per-worker JS chains for one API.
struct JsFactory {
    sources: Arc<Sources>,
    /// The hook of each entry in `sources.entries`.
    hooks: Vec<Hook>,
    timeout: Duration,
    file: PathBuf,
}

impl ChainFactory for JsFactory {
    fn instantiate(&self) -> Result<Chain, MwError> {
        let vm = Vm::build(&self.sources).map_err(|e| {
            MwError(format!(
                "{}: {}: {}",
                display(&self.file),
                e.field,
                e.message
            ))
        })?;
        let api = Rc::new(ApiVm {
            vm: tokio::sync::Mutex::new(Some(vm)),
            sources: self.sources.clone(),
            timeout: self.timeout,
        });
        let mut chain = Chain::default();
        for (index, ((name, _), hook)) in self.sources.entries.iter().zip(&self.hooks).enumerate() {
            let mw: Box<dyn Middleware> = Box::new(JsMiddleware {
                name: name.clone(),
                index,
                api: api.clone(),
            });
            match hook {
                Hook::Pre => chain.pre.push(mw),
                Hook::Post => chain.post.push(mw),
            }
        }
        Ok(chain)
    }
}

fn display(p: &Path) -> std::path::Display<'_> {
    p.display()
}

/// One API's context on one worker, shared by that API's entries.
struct ApiVm {
    /// `None` after a stopped call discarded the context; the next call
    /// rebuilds it. The async mutex serialises calls: a call suspended at a
    /// slice boundary still owns the VM's frame stack.
    vm: tokio::sync::Mutex<Option<Vm>>,
    sources: Arc<Sources>,
    timeout: Duration,
}

impl ApiVm {
    async fn call(
        &self,
        index: usize,
        name: &str,
        req: &mut MwRequest,
    ) -> Result<crate::middleware::Flow, MwError> {
        let deadline = Instant::now() + self.timeout;
        let mut slot = self.vm.lock().await;
        let timed_out = || {
            MwError(format!(
                "{name}: stopped after the jsvm timeout ({:?})",
                self.timeout
            ))
        };
        if Instant::now() >= deadline {
            return Err(timed_out());
        }
        let vm = match &mut *slot {
            Some(vm) => vm,
            empty => empty.insert(Vm::build(&self.sources).map_err(|e| {
                MwError(format!(
                    "{name}: rebuilding the JS context failed: {}: {}",
                    e.field, e.message
                ))
            })?),
        };
        match vm.call(index, req, deadline).await {
            Ok(flow) => Ok(flow),
            Err(CallError::Failed(e)) => Err(MwError(format!("{name}: {e}"))),
            Err(CallError::Stopped(stop)) => {
                // The VM stopped mid-frame: throw it away; the next call
                // builds a fresh one.
                *slot = None;
                Err(match stop {
                    budget::Stop::Timeout => timed_out(),
                    budget::Stop::Memory => {
                        MwError(format!("{name}: stopped for runaway memory growth"))
                    }
                })
            }
        }
    }
}

/// One middleware entry on one worker.
struct JsMiddleware {
    name: String,
    index: usize,
    api: Rc<ApiVm>,
}

impl Middleware for JsMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        Box::pin(self.api.call(self.index, &self.name, req))
    }
}
