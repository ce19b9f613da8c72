//! The WebAssembly middleware host (`driver: "wasm"`, alias `"proxy-wasm"`):
//! modules speaking the proxy-wasm ABI 0.2 (the one Envoy, Kong's
//! ngx_wasm_module, nginx and APISIX host), run in wasmtime.
//!
//! # How it runs
//!
//! Each `pre`/`post` entry's `path` is a module (`.wasm`, or `.wat` text),
//! its `name` the plugin's name (what `plugin_root_id` and `plugin_name`
//! return), and the API's `config_data` its VM and plugin configuration. At
//! load each module is compiled once, checked (it must export the ABI
//! marker, `proxy_on_context_create`, `memory` and an allocator, and import
//! only functions this host defines), linked, and started once to prove it
//! starts: every mistake a user can fix is a [`LoadError`] naming the file.
//! The compiled module is `Send + Sync`; each worker thread then makes its
//! own instance per entry ([`ChainFactory::instantiate`]), as the JS host
//! makes its own contexts, so a call never takes a lock or crosses threads.
//!
//! # What `--wasm-timeout` and `--wasm-memory` guarantee
//!
//! A call runs to completion on the worker thread. It is stopped by epoch
//! interruption no later than the timeout plus one tick (10 ms): the
//! request gets 500, and that worker serves nothing else meanwhile (unlike
//! the JS host, a wasm call does not yield; wasm calls take microseconds,
//! hence the shorter default, 1 s). An instance's linear memory may not
//! grow past the memory limit (64 MiB by default): the growing call traps
//! and the request gets 500. After any trap the instance is replaced by a
//! fresh one at once (module globals and memory reset, as a JS context is
//! rebuilt after a timeout), so the next request works. Recursion is bounded
//! by wasmtime's stack limit (a trap too).
//!
//! # Layout
//!
//! - [`abi`]: the ABI's status codes, enum values and map format.
//! - `module`: the engine, compilation, export and import checks.
//! - `host`: the host functions a module imports.
//! - `request`: the header map with pseudo-headers over the request.
//! - `instance`: one instance on one worker; the lifecycle calls.

pub mod abi;
mod host;
mod instance;
mod module;
mod request;

use std::cell::RefCell;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::{ApiSpec, Hook, LoadError};
use crate::middleware::{Chain, ChainFactory, Flow, Middleware, MwError, MwFuture, MwRequest};
use host::PluginInfo;
use instance::{Instance, StartError, Template};

/// The limits every wasm call runs under (`--wasm-timeout`, `--wasm-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WasmLimits {
    /// Longest one middleware call may run.
    pub timeout: Duration,
    /// Most linear memory one instance may have, in bytes.
    pub memory: usize,
}

impl Default for WasmLimits {
    fn default() -> Self {
        WasmLimits {
            timeout: Duration::from_secs(1),
            memory: 64 << 20,
        }
    }
}

/// Parses a memory size: `64MiB`, `512KiB`, `1GiB` (also `M`, `K`, `G`,
/// `MB`...: powers of 1024 all) or a bare number of bytes.
pub fn parse_memory_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = (&s[..split], s[split..].trim());
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 64MiB"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?}: unit must be KiB, MiB or GiB")),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if bytes < 64 << 10 {
        return Err(format!("{s:?} is less than one WebAssembly page (64KiB)"));
    }
    Ok(bytes)
}

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
            let pre = module::compile(std::path::Path::new(&e.path))
                .map_err(|m| LoadError::new(&spec.file, &field, m))?;
            let template = Arc::new(Template {
                pre,
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
            let instance = template.start().map_err(|e| MwError(start_message(e)))?;
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
    fn call_sync(&self, req: &mut MwRequest) -> Result<Flow, MwError> {
        let name = &self.template.plugin.name;
        let mut slot = self.instance.borrow_mut();
        let instance = match &mut *slot {
            Some(instance) => instance,
            empty => empty.insert(self.template.start().map_err(|e| {
                MwError(format!(
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
                Err(MwError(format!(
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
        Box::pin(ready(self.call_sync(req)))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_memory_size;

    #[test]
    fn memory_sizes_parse_in_powers_of_1024() {
        assert_eq!(parse_memory_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_memory_size("512k"), Ok(512 << 10));
        assert_eq!(parse_memory_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_memory_size("1048576"), Ok(1 << 20));
        assert!(parse_memory_size("1KiB").is_err());
        assert!(parse_memory_size("64 parsecs").is_err());
    }
}
