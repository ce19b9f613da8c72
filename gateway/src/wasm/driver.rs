//! The driver proper: an API's entries loaded into templates, and each
//! worker's instances behind the [`Middleware`] contract, replaced after a
//! fault.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::host::PluginInfo;
use super::instance::{Instance, StartError, Template};
use super::{module, WasmLimits};
use crate::config::{ApiSpec, Hook, LoadError};
use crate::middleware::{
    Chain, ChainFactory, Flow, Middleware, MwError, MwFuture, MwRequest, ReqMut,
};

/// Loads an API's wasm middleware: compiles, checks and starts each module
/// once. Errors name the definition file and the entry's field.
pub fn load(spec: &ApiSpec, limits: &WasmLimits) -> Result<Arc<dyn ChainFactory>, LoadError> {
    let config = match &spec.config_data {
        Value::Null => None,
        Value::String(s) => Some(s.clone().into_bytes()),
        other => Some(other.to_string().into_bytes()),
    };
    let mut entries = Vec::new();
    for hook in [Hook::Pre, Hook::Post] {
        for e in spec.entries(hook) {
            let field = format!("custom_middleware.{}[{}].path", hook.as_str(), e.index);
            let (pre, lifecycle) = module::compile(std::path::Path::new(&e.path))
                .map_err(|m| LoadError::new(&spec.file, &field, m))?;
            let template = Arc::new(Template {
                pre,
                lifecycle,
                plugin: Arc::new(PluginInfo {
                    name: e.name.clone(),
                    api_id: spec.api_id.clone(),
                    file: e.path.clone().into(),
                    config: config.clone(),
                }),
                file: e.path.clone().into(),
                timeout: limits.timeout,
                memory: limits.memory,
            });
            // Start one instance now, on the loading thread, so a module that
            // traps or refuses its configuration fails the load, not every
            // worker later.
            template.start().map_err(|err| match err {
                StartError::Config(m) => LoadError::new(&spec.file, "config_data", m),
                StartError::Module(m) => LoadError::new(&spec.file, &field, m),
            })?;
            entries.push((hook, template));
        }
    }
    Ok(Arc::new(WasmFactory { entries }))
}

/// Builds per-worker instances for one API's entries.
struct WasmFactory {
    entries: Vec<(Hook, Arc<Template>)>,
}

impl ChainFactory for WasmFactory {
    /// Never fails: an entry whose instance does not start on this worker
    /// (it started at load, so the cause is passing: a `proxy_on_vm_start`
    /// slowed past the timeout by load) answers 500 until a retry succeeds,
    /// instead of failing its API on this worker until the gateway restarts.
    fn instantiate(&self) -> Result<Chain, MwError> {
        let mut chain = Chain::default();
        for (hook, template) in &self.entries {
            let mw: Box<dyn Middleware> = Box::new(WasmMiddleware {
                template: template.clone(),
                state: RefCell::new(start(template, Duration::ZERO)),
            });
            // Only pre and post entries are loaded (response entries fail
            // the API closed at load: the lint refuses them for wasm).
            match hook {
                Hook::Pre => chain.pre.push(mw),
                _ => chain.post.push(mw),
            }
        }
        Ok(chain)
    }
}

/// How long an entry whose start failed answers 500 before the next try,
/// at first; each failure in a row doubles it up to [`RETRY_MAX`]. A start
/// runs on the worker thread under `--wasm-timeout`, so a module that hangs
/// while starting would stall every request on the worker if each request
/// tried again; backing off bounds that to one timeout per interval, while
/// a start that failed once (a timeout under load) is tried again soon.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// One entry's instance on one worker.
enum State {
    Ready(Instance),
    /// The last start failed (`why`): requests fail fast until `retry_at`.
    Down {
        why: String,
        retry_at: Instant,
        backoff: Duration,
    },
}

/// One entry on one worker: its instance, replaced after a fault.
struct WasmMiddleware {
    template: Arc<Template>,
    /// Borrowed for the length of one synchronous call.
    state: RefCell<State>,
}

/// Starts a new instance of `t`. On failure the entry is down for
/// `backoff` doubled (at least [`RETRY_FIRST`]), which is logged once per
/// attempt, naming the API and the file.
fn start(t: &Template, backoff: Duration) -> State {
    let retrying = backoff > Duration::ZERO;
    match t.start() {
        Ok(instance) => {
            if retrying {
                tracing::info!(
                    target: "wasm",
                    api_id = %t.plugin.api_id,
                    "wasm plugin {} ({}) started again on this worker",
                    t.plugin.name,
                    t.file.display()
                );
            }
            State::Ready(instance)
        }
        Err(e) => {
            let backoff = (backoff * 2).clamp(RETRY_FIRST, RETRY_MAX);
            let why = start_message(e);
            tracing::error!(
                target: "wasm",
                api_id = %t.plugin.api_id,
                "wasm plugin {} ({}) did not start on this worker, so its requests \
                 there are answered 500 until a try in {backoff:?} succeeds: {why}",
                t.plugin.name,
                t.file.display()
            );
            State::Down {
                why,
                retry_at: Instant::now() + backoff,
                backoff,
            }
        }
    }
}

impl WasmMiddleware {
    fn call_sync(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        let t = &self.template;
        let mut state = self.state.borrow_mut();
        if let State::Down {
            retry_at, backoff, ..
        } = &*state
        {
            if Instant::now() >= *retry_at {
                *state = start(t, *backoff);
            }
        }
        let instance = match &mut *state {
            State::Ready(instance) => instance,
            State::Down { why, retry_at, .. } => {
                let wait = retry_at.saturating_duration_since(Instant::now());
                return Err(MwError::not_loaded(format!(
                    "wasm plugin {} ({}) is not running on this worker: its last start \
                     failed: {why}; next try in {wait:?}",
                    t.plugin.name,
                    t.file.display()
                )));
            }
        };
        match instance.call(req) {
            Ok(flow) => Ok(flow),
            Err(fault) => {
                // The module stopped mid-call: its state is unknown. Start a
                // fresh instance now, so the next request finds one ready.
                *state = start(t, Duration::ZERO);
                Err(MwError::plugin_fault(format!(
                    "wasm plugin {} ({}): {}",
                    t.plugin.name,
                    t.file.display(),
                    fault.0
                )))
            }
        }
    }
}

fn start_message(e: StartError) -> String {
    match e {
        StartError::Config(m) | StartError::Module(m) => m,
    }
}

impl Middleware for WasmMiddleware {
    fn name(&self) -> &str {
        &self.template.plugin.name
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        MwFuture::ready(self.call_sync(ReqMut::Owned(req)))
    }

    fn call_now(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        self.call_sync(req)
    }

    fn never_waits(&self) -> bool {
        true
    }
}
