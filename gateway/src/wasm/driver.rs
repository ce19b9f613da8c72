//! The driver proper: an API's entries loaded into templates, and each
//! worker's instances behind the [`Middleware`] contract, replaced after a
//! fault.

use std::cell::RefCell;
use std::sync::Arc;

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
    fn instantiate(&self) -> Result<Chain, MwError> {
        let mut chain = Chain::default();
        for (hook, template) in &self.entries {
            let instance = template
                .start()
                .map_err(|e| MwError::not_loaded(start_message(e)))?;
            let mw: Box<dyn Middleware> = Box::new(WasmMiddleware {
                template: template.clone(),
                instance: RefCell::new(Some(instance)),
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

fn start_message(e: StartError) -> String {
    match e {
        StartError::Config(m) | StartError::Module(m) => m,
    }
}

/// One entry on one worker: its instance, replaced after a fault.
struct WasmMiddleware {
    template: Arc<Template>,
    /// `None` only when restarting after a fault failed; the next call
    /// tries again. Borrowed for the length of one synchronous call.
    instance: RefCell<Option<Instance>>,
}

impl WasmMiddleware {
    fn call_sync(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        let name = &self.template.plugin.name;
        let mut slot = self.instance.borrow_mut();
        let instance = match &mut *slot {
            Some(instance) => instance,
            empty => empty.insert(self.template.start().map_err(|e| {
                MwError::not_loaded(format!(
                    "wasm plugin {name}: restarting failed: {}",
                    start_message(e)
                ))
            })?),
        };
        match instance.call(req) {
            Ok(flow) => Ok(flow),
            Err(fault) => {
                // The module stopped mid-call: its state is unknown. Start a
                // fresh instance now, so the next request finds one ready.
                *slot = self.template.start().ok();
                Err(MwError::plugin_fault(format!(
                    "wasm plugin {name} ({}): {}",
                    self.template.file.display(),
                    fault.0
                )))
            }
        }
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
