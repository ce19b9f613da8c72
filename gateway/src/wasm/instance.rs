//! One module instance on one worker thread, and the proxy-wasm lifecycle
//! the host drives it through.
//!
//! Start (once per instance): `_initialize` (where the Rust SDK's `main!`
//! registers the root context), `proxy_on_context_create(root, 0)`,
//! `proxy_on_vm_start`, `proxy_on_configure`. Per request, with a fresh
//! context id: `proxy_on_context_create(id, root)`,
//! `proxy_on_request_headers`, `proxy_on_request_body` when there is a body
//! and nobody answered yet, then `proxy_on_done` and `proxy_on_delete`.
//! `proxy_on_log` is not called: in Envoy it runs after the response, a
//! phase this gateway has no middleware for.
//!
//! The per-request calls are made from inside WebAssembly: the host enters
//! once, into the small module `module::lifecycle` generates for the
//! plugin's set of exports, instantiated beside the plugin in the same
//! store, and that module calls the plugin's exports in the order above.
//! One entry instead of four saves wasmtime's entry and exit three times
//! per request (callgrind: ~3 x 220 instructions); the calls, their
//! arguments and their order are the same.
//!
//! Every call runs under the store's epoch deadline (`--wasm-timeout`) and
//! memory limit (`--wasm-memory`). A trap (including those two) leaves the
//! module's own state unknown (a context half made, a lock its allocator
//! held), so the instance is never called again: the caller starts a new one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Extern, InstancePre, Module, Store, Trap, TypedFunc};

use super::abi;
use super::host::{HostState, PluginInfo};
use super::module::{self, TICK};
use crate::middleware::{Flow, ReqMut};

/// The root context's id; request contexts count up from the next one.
const ROOT: u32 = 1;

/// Everything needed to start instances of one entry, shared by all workers.
pub struct Template {
    pub pre: InstancePre<HostState>,
    /// The module that runs a request's lifecycle (`module::lifecycle`).
    pub lifecycle: Module,
    pub plugin: Arc<PluginInfo>,
    pub file: PathBuf,
    pub timeout: Duration,
    pub memory: usize,
}

/// Why an instance did not start.
#[derive(Debug)]
pub enum StartError {
    /// `proxy_on_configure` returned false: the plugin rejected `config_data`.
    Config(String),
    /// Anything else: a missing or mistyped export, a trap, a false
    /// `proxy_on_vm_start`, memory over the limit at instantiation.
    Module(String),
}

/// The plugin's lifecycle exports, looked up (and their types checked)
/// once per instance, then handed to the lifecycle module.
struct Exports {
    on_context_create: TypedFunc<(u32, u32), ()>,
    on_request_headers: Option<TypedFunc<(u32, u32, u32), u32>>,
    on_request_body: Option<TypedFunc<(u32, u32, u32), u32>>,
    on_done: Option<TypedFunc<u32, u32>>,
    on_delete: Option<TypedFunc<u32, ()>>,
}

/// A started instance: its store (memory, host state) and entry points.
pub struct Instance {
    store: Store<HostState>,
    /// The lifecycle module's `request(id, root, num_headers, body_len)`.
    request: TypedFunc<(u32, u32, u32, u32), u32>,
    next_id: u32,
    deadline_ticks: u64,
    timeout: Duration,
}

/// What went wrong in a call; the instance must be replaced.
#[derive(Debug)]
pub struct Fault(pub String);

impl Template {
    /// Makes and starts a new instance: instantiation, then the start
    /// lifecycle, under the same time and memory limits as a request.
    pub fn start(&self) -> Result<Instance, StartError> {
        let engine = module::engine().map_err(StartError::Module)?;
        let mut store = Store::new(engine, HostState::new(self.plugin.clone(), self.memory));
        store.limiter(|st| &mut st.limits);
        let deadline_ticks = ticks(self.timeout);
        store.set_epoch_deadline(deadline_ticks);
        let fail = |what: &str, e: wasmtime::Error| {
            StartError::Module(format!(
                "{}: {what}: {}",
                self.file.display(),
                describe(&e, self.timeout)
            ))
        };
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| fail("instantiation failed", e))?;
        let exports = Exports {
            on_context_create: instance
                .get_typed_func(&mut store, "proxy_on_context_create")
                .map_err(|e| fail("proxy_on_context_create", e))?,
            on_request_headers: optional(&instance, &mut store, "proxy_on_request_headers")
                .map_err(|e| fail("proxy_on_request_headers", e))?,
            on_request_body: optional(&instance, &mut store, "proxy_on_request_body")
                .map_err(|e| fail("proxy_on_request_body", e))?,
            on_done: optional(&instance, &mut store, "proxy_on_done")
                .map_err(|e| fail("proxy_on_done", e))?,
            on_delete: optional(&instance, &mut store, "proxy_on_delete")
                .map_err(|e| fail("proxy_on_delete", e))?,
        };
        let malloc = optional::<u32, u32>(&instance, &mut store, "malloc")
            .transpose()
            .or_else(|| optional(&instance, &mut store, "proxy_on_memory_allocate").transpose())
            .transpose()
            .map_err(|e| fail("malloc", e))?;
        // Checked at compile (`module::check_exports`); never taken as
        // absent, which would fail every host call with a bad pointer.
        let memory = instance.get_memory(&mut store, "memory").ok_or_else(|| {
            StartError::Module(format!(
                "{}: exports no linear memory named memory",
                self.file.display()
            ))
        })?;
        (store.data_mut().malloc, store.data_mut().memory) = (malloc, Some(memory));

        // The start lifecycle.
        if let Some(init) = optional::<(), ()>(&instance, &mut store, "_initialize")
            .map_err(|e| fail("_initialize", e))?
        {
            init.call(&mut store, ())
                .map_err(|e| fail("_initialize", e))?;
        }
        exports
            .on_context_create
            .call(&mut store, (ROOT, 0))
            .map_err(|e| fail("proxy_on_context_create (root)", e))?;
        let config_len = self.plugin.config.as_ref().map_or(0, Vec::len) as u32;
        for (name, is_config) in [("proxy_on_vm_start", false), ("proxy_on_configure", true)] {
            let Some(f) = optional::<(u32, u32), u32>(&instance, &mut store, name)
                .map_err(|e| fail(name, e))?
            else {
                continue;
            };
            let ok = f
                .call(&mut store, (ROOT, config_len))
                .map_err(|e| fail(name, e))?;
            if ok == 0 && is_config {
                return Err(StartError::Config(format!(
                    "{}: proxy_on_configure returned false: the plugin rejected its configuration",
                    self.file.display()
                )));
            }
            if ok == 0 {
                return Err(StartError::Module(format!(
                    "{}: {name} returned false",
                    self.file.display()
                )));
            }
        }
        let request = self
            .link_lifecycle(&mut store, &exports)
            .map_err(|e| fail("linking the lifecycle", e))?;
        Ok(Instance {
            store,
            request,
            next_id: ROOT + 1,
            deadline_ticks,
            timeout: self.timeout,
        })
    }
}

impl Template {
    /// Instantiates the lifecycle module against this instance's exports
    /// (the same ones, in the order `module::lifecycle` imports them).
    fn link_lifecycle(
        &self,
        store: &mut Store<HostState>,
        ex: &Exports,
    ) -> wasmtime::Result<TypedFunc<(u32, u32, u32, u32), u32>> {
        let mut imports: Vec<Extern> = vec![(*ex.on_context_create.func()).into()];
        let optional = [
            ex.on_request_headers.as_ref().map(TypedFunc::func),
            ex.on_request_body.as_ref().map(TypedFunc::func),
            ex.on_done.as_ref().map(TypedFunc::func),
            ex.on_delete.as_ref().map(TypedFunc::func),
        ];
        imports.extend(optional.into_iter().flatten().map(|&f| f.into()));
        let instance = wasmtime::Instance::new(&mut *store, &self.lifecycle, &imports)?;
        // What `proxy_on_request_body` gets after the headers phase, kept
        // current by the host functions that change it (`host.rs`).
        store.data_mut().body_to_send = instance.get_global(&mut *store, "body_to_send");
        instance.get_typed_func(&mut *store, "request")
    }
}

/// An export that may be absent; present with the wrong type is an error.
fn optional<P, R>(
    instance: &wasmtime::Instance,
    store: &mut Store<HostState>,
    name: &str,
) -> wasmtime::Result<Option<TypedFunc<P, R>>>
where
    P: wasmtime::WasmParams,
    R: wasmtime::WasmResults,
{
    match instance.get_func(&mut *store, name) {
        Some(f) => f.typed(&*store).map(Some),
        None => Ok(None),
    }
}

/// Epoch ticks for `timeout`: rounded up, plus one because the deadline
/// counts from the current epoch, which may be about to advance.
fn ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos().div_ceil(TICK.as_nanos()) as u64).saturating_add(1)
}

/// One line for a trap or error: what a log reader needs to act on.
fn describe(e: &wasmtime::Error, timeout: Duration) -> String {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => format!("stopped after the wasm timeout ({timeout:?})"),
        Some(Trap::StackOverflow) => "stack overflow (unbounded recursion?)".into(),
        _ => {
            let root = e.root_cause().to_string();
            match e.downcast_ref::<wasmtime::WasmBacktrace>() {
                Some(bt) => match bt.frames().first().and_then(|f| f.func_name()) {
                    Some(func) => format!("{root} (in {func})"),
                    None => root,
                },
                None => root,
            }
        }
    }
}

impl Instance {
    /// Runs one request through the module. On `Err` the instance must not
    /// be called again.
    pub fn call(&mut self, mut req: ReqMut<'_, '_>) -> Result<Flow, Fault> {
        let id = self.next_id;
        // Ids wrap, skipping 0 and the root's.
        self.next_id = if id == u32::MAX { ROOT + 1 } else { id + 1 };
        let timeout = self.timeout;
        let st = self.store.data_mut();
        st.req.take_from(&mut req);
        st.remote = req.remote_addr();
        st.response = None;
        self.store.set_epoch_deadline(self.deadline_ticks);
        let result = self.lifecycle(id);
        let st = self.store.data_mut();
        st.req.give_back(&mut req);
        let response = st.response.take();
        match result {
            Err(e) => Err(Fault(describe(&e, timeout))),
            Ok(_) if response.is_some() => Ok(Flow::Respond(Box::new(response.expect("checked")))),
            Ok(abi::ACTION_CONTINUE) => Ok(Flow::Continue),
            Ok(abi::ACTION_PAUSE) => Err(Fault(
                "the module paused the request without answering it (asynchronous calls are not supported)".into(),
            )),
            Ok(n) => Err(Fault(format!(
                "the module returned {}, which is not an action of the ABI (0 continue, 1 pause)",
                n as i32
            ))),
        }
    }

    /// The per-request calls, in one entry into wasm; returns the last
    /// action. `num_headers` is counted as the request arrived (before
    /// `proxy_on_context_create`, which in Envoy runs before there are
    /// headers at all).
    fn lifecycle(&mut self, id: u32) -> wasmtime::Result<u32> {
        let req = &self.store.data().req;
        let (count, body_len) = (req.count() as u32, req.body.len() as u32);
        self.request
            .call(&mut self.store, (id, ROOT, count, body_len))
    }
}
