//! The native plugin host (`driver: "goplugin"`, alias `"native"`).
//!
//! Each `pre`/`post` entry names a library (`path`) and an exported symbol
//! (`name`) speaking the C ABI of the `plugin-sdk` crate (`plugin_sdk::abi`,
//! `plugins/sdk/include/gw_plugin.h`). At load every library is opened (once
//! per file, shared by all APIs, never unloaded), its ABI version checked and
//! every symbol resolved, so that every fixable mistake surfaces as a
//! [`LoadError`] before the API serves. A call is then one indirect function
//! call with a pointer to the host table and to the request.
//!
//! # Layout
//!
//! - [`library`]: opening, caching and version-checking libraries, and
//!   finding an entry (a plain symbol, or a Go adapter's handler).
//! - `preflight`: loading a library first in a child process, so one whose
//!   initialisers end or hang the process fails only its API.
//! - `symbols`: listing a library's exported middleware for error messages.
//! - `host`: the callback table and the per-call context behind the handle.

mod host;
pub mod library;
mod preflight;
mod response;
mod symbols;

use std::cell::RefCell;
use std::sync::Arc;

use plugin_sdk::abi::{GwPluginFn, GwRequest, GW_CONTINUE};

use crate::config::{ApiSpec, Hook, LoadError};
use crate::intern::HeaderCache;
use crate::middleware::{
    Chain, ChainFactory, Flow, HostOptions, Middleware, MwError, MwFuture, MwRequest, ReqMut,
};
use host::{ApiInfo, Ctx, HOST};
use library::OpenError;

/// The ABI minor version that brought the response phase (1.2): a library
/// built against it or later may be a response entry. Not
/// [`plugin_sdk::abi::ABI_MINOR`], which grows with every addition: a
/// response hook built against 1.2 was refused once the SDK spoke 1.3.
const RESPONSE_PHASE_MINOR: u32 = 2;

/// One resolved entry: the symbol's name and its address. Plain data, so the
/// factory is `Send + Sync` and instances are trivially cheap.
#[derive(Clone)]
struct Entry {
    name: Arc<str>,
    func: GwPluginFn,
    /// What the plugin may read about its API (ABI 1.1 callbacks).
    api: Arc<ApiInfo>,
}

struct NativeFactory {
    pre: Vec<Entry>,
    post: Vec<Entry>,
    response: Vec<Entry>,
}

/// Loads an API's native middleware: opens each library, checks its ABI
/// version and resolves each symbol.
///
/// Errors name the definition file, the field (`custom_middleware.pre[0].path`
/// for library problems, `.name` for a missing symbol), the library and the
/// symbol.
pub fn load(spec: &ApiSpec, opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    let info = |config: &serde_json::Value| {
        Arc::new(ApiInfo {
            api_id: spec.api_id.clone(),
            config_json: match config {
                serde_json::Value::Null => "{}".to_string(),
                v => v.to_string(),
            },
            budget_us: u64::try_from(opts.jsvm_timeout.as_micros()).unwrap_or(u64::MAX),
        })
    };
    let api = info(&spec.config_data);
    // A Tyk Go plugin reads the definition's config_data even when
    // config_data_disabled (Tyk blanks it for JS only; ctx.GetDefinition
    // hands over the whole APIDefinition).
    let go_api = if spec.config_data_disabled {
        info(&spec.config_data_written)
    } else {
        api.clone()
    };
    let resolve = |hook: Hook| -> Result<Vec<Entry>, LoadError> {
        let mut out = Vec::new();
        for e in spec.entries(hook) {
            let field = |f: &str| format!("custom_middleware.{}[{}].{f}", hook.as_str(), e.index);
            let mut is_go = false;
            let resolved = library::open(&e.path).and_then(|lib| {
                is_go = lib.is_go();
                if hook == Hook::Response && lib.is_go() {
                    return Err(OpenError::Path(format!(
                        "library {:?} is a Go plugin adapter, which has no response phase: Tyk's \
                         Go response hooks (func(http.ResponseWriter, *http.Response, \
                         *http.Request)) are not supported; answer from a pre or post handler, \
                         or edit responses with a JS or native response hook",
                        e.path
                    )));
                }
                if hook == Hook::Response && lib.minor() < RESPONSE_PHASE_MINOR {
                    return Err(OpenError::Path(format!(
                        "library {:?} was built for ABI 1.{} and has no response phase; a response \
                         entry needs a plugin built against ABI 1.{RESPONSE_PHASE_MINOR} or later \
                         (this gateway's plugin-sdk, or gw_plugin.h's \
                         GW_PLUGIN_EXPORT_ABI_VERSION())",
                        e.path,
                        lib.minor().max(1),
                    )));
                }
                if lib.is_go() {
                    go_config_data(spec)?;
                }
                library::symbol(lib, &e.path, &e.name)
            });
            let func = resolved.map_err(|err| match err {
                OpenError::ConfigData(m) => LoadError::new(&spec.file, "config_data", m),
                OpenError::Path(m) => LoadError::new(
                    &spec.file,
                    field("path"),
                    format!("{m} (wanted for symbol {:?})", e.name),
                ),
                OpenError::Symbol(m) => LoadError::new(&spec.file, field("name"), m),
            })?;
            out.push(Entry {
                name: e.name.as_str().into(),
                func,
                api: if is_go { go_api.clone() } else { api.clone() },
            });
        }
        Ok(out)
    };
    Ok(Arc::new(NativeFactory {
        pre: resolve(Hook::Pre)?,
        post: resolve(Hook::Post)?,
        response: resolve(Hook::Response)?,
    }))
}

/// A Go plugin reads `config_data` as Tyk's `APIDefinition.ConfigData`, a
/// `map[string]interface{}`: Tyk refuses a definition whose `config_data` is
/// not an object (or null), and a Go handler here would have read a nil map
/// as if the definition had none (a deny list missing, so nothing denied).
fn go_config_data(spec: &ApiSpec) -> Result<(), OpenError> {
    let kind = match &spec.config_data_written {
        serde_json::Value::Object(_) | serde_json::Value::Null => return Ok(()),
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
    };
    Err(OpenError::ConfigData(format!(
        "config_data is {kind}; a Go plugin reads it as Tyk's APIDefinition.ConfigData, a JSON \
         object (map[string]interface{{}}), and Tyk refuses such a definition"
    )))
}

impl ChainFactory for NativeFactory {
    fn instantiate(&self) -> Result<Chain, MwError> {
        let boxed = |list: &[Entry]| -> Vec<Box<dyn Middleware>> {
            list.iter()
                .map(|e| {
                    Box::new(NativeMiddleware {
                        entry: e.clone(),
                        cache: RefCell::default(),
                    }) as Box<dyn Middleware>
                })
                .collect()
        };
        Ok(Chain {
            pre: boxed(&self.pre),
            post: boxed(&self.post),
            response: self
                .response
                .iter()
                .map(|e| {
                    Box::new(response::NativeResponse(e.clone()))
                        as Box<dyn crate::middleware::ResponseMiddleware>
                })
                .collect(),
            endpoints: Vec::new(),
        })
    }
}

/// One entry on one worker, with its header cache.
struct NativeMiddleware {
    entry: Entry,
    cache: RefCell<HeaderCache>,
}

impl NativeMiddleware {
    /// The synchronous call: plugins run to completion on the worker thread.
    /// Inlined into [`Middleware::call_now`], the hot one (a call of its
    /// own there was ~6 instructions a request).
    #[inline(always)]
    fn call_sync(&self, req: ReqMut<'_, '_>) -> Result<Flow, MwError> {
        let mut ctx = Ctx {
            req,
            api: &self.entry.api,
            name: &self.entry.name,
            response: None,
            fault: None,
            error: None,
            resp: None,
            cache: &mut self.cache.borrow_mut(),
            head: crate::middleware::HeadBudget::new(),
        };
        let handle = &mut ctx as *mut Ctx<'_, '_> as *mut GwRequest;
        // SAFETY: `func` was resolved from a version-checked library that is
        // never unloaded; `HOST` is 'static; `handle` points at `ctx`, which
        // outlives the call and is not touched by us until it returns.
        let rc = unsafe { (self.entry.func)(&HOST, handle) };
        let name = &self.entry.name;
        if let Some(fault) = ctx.fault {
            return Err(MwError::plugin_fault(format!(
                "native plugin {name}: {fault}"
            )));
        }
        if rc != GW_CONTINUE {
            let why = ctx.error.unwrap_or_else(|| "no message".to_string());
            return Err(MwError::threw(format!(
                "native plugin {name} returned error code {rc}: {why}"
            )));
        }
        Ok(match ctx.response {
            Some(resp) => Flow::Respond(resp),
            None => Flow::Continue,
        })
    }
}

impl Middleware for NativeMiddleware {
    fn name(&self) -> &str {
        &self.entry.name
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
