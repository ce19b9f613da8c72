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
//! A call runs inline and is stopped by QuickJS's interrupt handler once the
//! `--jsvm-timeout` deadline has passed, wherever the time goes: script
//! loops, callbacks of builtins, regular expressions. Memory past
//! `--jsvm-memory` and native stack past [`engine::STACK_LIMIT`] fail the
//! call. Each is a 500; after a timeout or the memory limit the API's state
//! on that worker is rebuilt (globals reset), after a stack overflow it is
//! kept (it is an ordinary `RangeError`). What it cannot do: yield while a
//! long call runs, so other requests on the same worker wait for it (up to
//! the timeout) unless the call runs on a VM thread.
//!
//! # Layout
//!
//! - `engine`: the runtime and its limits, native globals, bytecode.
//! - `api`: one API's state on one thread (`persistent`, `fresh`); a call.
//! - `answer`: the request handed to the script; applying its answer.
//! - `host.js`: the JS side of a call (builds `request`, dispatches).

mod answer;
mod api;
mod engine;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rquickjs::{Context, Runtime};

use crate::config::{ApiSpec, Hook, LoadError};
use crate::middleware::{
    Chain, ChainFactory, HostOptions, Middleware, MwError, MwFuture, MwRequest,
};

use api::{Program, QjsApi, Strategy};

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
    let strategy = match chosen {
        super::Strategy::Persistent => Strategy::Persistent,
        super::Strategy::Fresh => Strategy::Fresh,
    };
    let (sources, entries, hooks) = read_sources(spec)?;
    let program = compile(spec, opts, strategy, &sources, entries)
        .map_err(|e| LoadError::new(&spec.file, e.field, e.message))?;
    let program = Arc::new(program);
    // One full build on the loading thread: top-level code runs and every
    // entry's object is checked, whatever the strategy.
    QjsApi::new(Arc::new(Program {
        strategy: Strategy::Persistent,
        ..(*program).clone()
    }))
    .map_err(|e| LoadError::new(&spec.file, e.field, e.message))?;
    Ok(Arc::new(QjsFactory {
        program,
        hooks,
        file: spec.file.clone(),
    }))
}

/// One script file: (path, definition field, text).
type Source = (PathBuf, String, String);

/// Reads each distinct script once, in entry order; returns the scripts,
/// `(name, field)` per entry and each entry's hook.
#[allow(clippy::type_complexity)]
fn read_sources(
    spec: &ApiSpec,
) -> Result<(Vec<Source>, Vec<(String, String)>, Vec<Hook>), LoadError> {
    let (mut scripts, mut entries, mut hooks) = (Vec::<Source>::new(), Vec::new(), Vec::new());
    let mut entry_files = Vec::new();
    for hook in [Hook::Pre, Hook::Post] {
        for e in spec.entries(hook) {
            // `e.index` counts disabled entries too: the entry the user wrote.
            let field = format!("custom_middleware.{}[{}]", hook.as_str(), e.index);
            let file = PathBuf::from(&e.path);
            if !scripts.iter().any(|s| s.0 == file) {
                let text = std::fs::read_to_string(&file).map_err(|err| {
                    LoadError::new(
                        &spec.file,
                        format!("{field}.path"),
                        format!("cannot read {}: {err}", file.display()),
                    )
                })?;
                scripts.push((file, format!("{field}.path"), text));
            }
            entries.push((e.name.clone(), format!("{field}.name")));
            hooks.push(hook);
            entry_files.push(PathBuf::from(&e.path));
        }
    }
    // Each file in a scope of its own, as on boa (`js/scope.rs`).
    for (file, _, text) in &mut scripts {
        *text = super::scope::wrap(text, &super::scope::served(&entries, &entry_files, file));
    }
    Ok((scripts, entries, hooks))
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
    sources: &[Source],
    entries: Vec<(String, String)>,
) -> Result<Program, api::BuildError> {
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
        // Each entry's object is found once, through its file's scope.
        let calls: Vec<String> = (0..entries.len())
            .map(|i| format!("function (request, spec) {{ return mw[{i}].ProcessRequest(request, {{}}, spec); }}"))
            .collect();
        let dispatch = format!(
            "(function (mw) {{ return [{}]; }})({})",
            calls.join(",\n"),
            super::scope::RESOLVE
        );
        let dispatch = engine::compile(&ctx, &dispatch, "<dispatch>").map_err(internal)?;
        let host = engine::compile(&ctx, &host_source(spec), "<host.js>").map_err(internal)?;
        Ok(Program {
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
/// (a `__proto__` key stays a plain key).
fn host_source(spec: &ApiSpec) -> String {
    let js = |s: &str| serde_json::Value::from(s).to_string();
    let config = js(&spec.config_data.to_string());
    format!(
        "(function (dispatch) {{\nvar spec = {{APIID: {}, OrgID: {}, config_data: JSON.parse({config})}};\n{HOST_JS}\nreturn call;\n}})",
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
}

impl ChainFactory for QjsFactory {
    fn instantiate(&self) -> Result<Chain, MwError> {
        let api = QjsApi::new(self.program.clone()).map_err(|e| {
            MwError(format!(
                "{}: {}: {}",
                self.file.display(),
                e.field,
                e.message
            ))
        })?;
        let api = Rc::new(RefCell::new(api));
        let mut chain = Chain::default();
        for (index, ((name, _), hook)) in self.program.entries.iter().zip(&self.hooks).enumerate() {
            let mw: Box<dyn Middleware> = Box::new(QjsMiddleware {
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

/// One middleware entry on one worker. The call runs inline: the future is
/// ready when it is first polled.
struct QjsMiddleware {
    name: String,
    index: usize,
    api: Rc<RefCell<QjsApi>>,
}

impl Middleware for QjsMiddleware {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, req: &'a mut MwRequest) -> MwFuture<'a> {
        Box::pin(async move {
            // Calls on one worker never overlap (each runs to completion
            // without yielding), so the borrow cannot be contended.
            let mut api = self.api.borrow_mut();
            api.call(self.index, req)
                .map_err(|e| MwError(format!("{}: {e}", self.name)))
        })
    }
}
