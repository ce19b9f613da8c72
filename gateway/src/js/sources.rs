//! Reading an API's scripts at load, for either engine: every middleware
//! entry's file (when the API's driver is JS) and every virtual endpoint's
//! source (a file, or a base64 blob in the definition), each distinct
//! script once, with the definition field that named it for errors.
//!
//! A virtual endpoint whose script cannot load (its file is missing, its
//! blob is not base64, its source type unknown, its script does not
//! compile) or whose function is not defined fails only its own path, as
//! in Tyk: Tyk logs a script it cannot load once (`preLoadVirtualMetaCode`)
//! and carries on, and a request to the path then finds no function and
//! gets its 500 (or is proxied, with `proxy_on_error`). The rest of the
//! API, its other endpoints included, keeps serving. Tyk's scripts share
//! one VM, so an endpoint whose own script failed still serves when
//! another script defines its function; so it does here.
//! [`without_broken`] finds the endpoints that cannot serve, for either
//! engine, by building the API and setting aside what a build error names;
//! the chain then holds a [`BrokenEndpoint`] in each one's place.

use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::vm::ScriptFile;
use crate::config::{ApiSpec, Driver, Hook, LoadError, VirtualSource};
use crate::middleware::{Endpoint, MwError, MwFutureOf, MwRequest, MwResponse};

/// What the JS hosts load for one API.
pub(crate) struct ApiScripts {
    /// Each distinct script once: middleware files, then endpoint sources.
    pub(crate) scripts: Vec<ScriptFile>,
    /// `(name, field)` per request-phase entry, pre then post.
    pub(crate) entries: Vec<(String, String)>,
    /// The hook of each of `entries`.
    pub(crate) hooks: Vec<Hook>,
    /// `(name, field)` per response entry.
    pub(crate) response: Vec<(String, String)>,
    /// `(response_function_name, field)` per virtual endpoint that loaded.
    pub(crate) endpoints: Vec<(String, String)>,
    /// The script of each of `endpoints` (empty when it could not load).
    pub(crate) endpoint_files: Vec<PathBuf>,
    /// Why the script of each of `endpoints` did not load, if it did not:
    /// `(field, message)`. Such an endpoint serves only if another script
    /// defines its function.
    pub(crate) script_errors: Vec<Option<(String, String)>>,
    /// The `use_session` of each of `endpoints`: Tyk then hands the
    /// function the request's session, which a keyless API (every API
    /// here) does not have: `null`. Without it, a new empty session.
    pub(crate) sessions: Vec<bool>,
    /// Every virtual endpoint of the definition, in its order.
    pub(crate) slots: Vec<Slot>,
    /// The file of each of `entries`, then of each of `response`.
    pub(crate) entry_files: Vec<PathBuf>,
}

/// One of the definition's virtual endpoints, as the chain serves it.
#[derive(Debug, Clone)]
pub(crate) enum Slot {
    /// Served by the JS context: its index in `endpoints`.
    Live(usize),
    /// Cannot serve: every request to its path fails with this reason,
    /// which names the definition file and field.
    Broken { name: String, reason: String },
}

/// Reads `spec`'s scripts. Middleware entries are the JS host's only when
/// the driver is JS: an API with a native or wasm driver may still have
/// virtual endpoints, which always run in JS (as in Tyk).
pub(crate) fn read(spec: &ApiSpec) -> Result<ApiScripts, LoadError> {
    let mut out = ApiScripts {
        scripts: Vec::new(),
        entries: Vec::new(),
        hooks: Vec::new(),
        response: Vec::new(),
        endpoints: Vec::new(),
        endpoint_files: Vec::new(),
        script_errors: Vec::new(),
        sessions: Vec::new(),
        slots: Vec::new(),
        entry_files: Vec::new(),
    };
    let ours = matches!(spec.driver, Some(Driver::Js));
    for hook in [Hook::Pre, Hook::Post, Hook::Response] {
        for e in spec.entries(hook).iter().filter(|_| ours) {
            // `e.index` counts disabled entries too: the entry the user wrote.
            let field = format!("custom_middleware.{}[{}]", hook.as_str(), e.index);
            let file = PathBuf::from(&e.path);
            if !out.scripts.iter().any(|s| s.file == file) {
                let text = read_file(spec, &file, &format!("{field}.path"))?;
                out.scripts.push(ScriptFile {
                    file: file.clone(),
                    field: format!("{field}.path"),
                    text,
                });
            }
            let named = (e.name.clone(), format!("{field}.name"));
            out.entry_files.push(file.clone());
            if hook == Hook::Response {
                out.response.push(named);
            } else {
                out.entries.push(named);
                out.hooks.push(hook);
            }
        }
    }
    for v in &spec.virtual_endpoints {
        let (file, error) = match endpoint_source(spec, v) {
            Ok((file, text)) => {
                if !out.scripts.iter().any(|s| s.file == file) {
                    out.scripts.push(ScriptFile {
                        file: file.clone(),
                        field: format!("{}.function_source_uri", v.field),
                        text,
                    });
                }
                (file, None)
            }
            Err(e) => (PathBuf::new(), Some((e.field, e.message))),
        };
        out.slots.push(Slot::Live(out.endpoints.len()));
        out.endpoints.push((
            v.function.clone(),
            format!("{}.response_function_name", v.field),
        ));
        out.endpoint_files.push(file);
        out.script_errors.push(error);
        out.sessions.push(v.use_session);
    }
    Ok(out)
}

/// The script of virtual endpoint `v`: its file's path and text.
fn endpoint_source(
    spec: &ApiSpec,
    v: &crate::config::VirtualEndpoint,
) -> Result<(PathBuf, String), LoadError> {
    let field = format!("{}.function_source_uri", v.field);
    match &v.source {
        VirtualSource::File(path) => {
            let file = PathBuf::from(path);
            let text = read_file(spec, &file, &field)?;
            Ok((file, text))
        }
        VirtualSource::Blob(b64) => {
            let bytes = STANDARD.decode(b64.trim()).map_err(|e| {
                LoadError::new(
                    &spec.file,
                    &field,
                    format!("is not base64 (a \"blob\"): {e}"),
                )
            })?;
            let text = String::from_utf8(bytes).map_err(|_| {
                LoadError::new(&spec.file, &field, "decodes to text that is not UTF-8")
            })?;
            Ok((PathBuf::from(format!("<{} blob>", v.field)), text))
        }
        VirtualSource::Unknown(other) => Err(LoadError::new(
            &spec.file,
            format!("{}.function_source_type", v.field),
            format!("{other:?}: must be \"file\" or \"blob\" (base64), as in Tyk"),
        )),
    }
}

/// Sets endpoint `v` aside: logged once here, as Tyk logs it at load.
fn broken(spec: &ApiSpec, v: &crate::config::VirtualEndpoint, field: &str, message: &str) -> Slot {
    let reason = format!("{}: {field}: {message}", spec.file.display());
    let then = if v.proxy_on_error {
        "proxied (proxy_on_error)"
    } else {
        "answered 500"
    };
    tracing::error!(
        "{reason}; virtual endpoint {:?} not loaded: {} {} requests are {then}",
        v.function,
        v.method,
        v.path
    );
    Slot::Broken {
        name: v.function.clone(),
        reason,
    }
}

/// Builds the API with `build` until it builds or fails on something
/// other than a virtual endpoint (a middleware entry's error still fails
/// the whole API). A script only endpoints use that does not compile is
/// dropped (its endpoints' script error); an endpoint whose function a
/// build error names is set aside, with its script's error if it had one.
pub(crate) fn without_broken<T>(
    spec: &ApiSpec,
    read: &mut ApiScripts,
    mut build: impl FnMut(&ApiScripts) -> Result<T, (String, String)>,
) -> Result<T, LoadError> {
    loop {
        let (field, message) = match build(read) {
            Ok(built) => {
                log_served_despite(spec, read);
                return Ok(built);
            }
            Err(e) => e,
        };
        if let Some(j) = read.endpoints.iter().position(|(_, f)| *f == field) {
            let (field, message) = read.script_errors[j].clone().unwrap_or((field, message));
            set_aside(spec, read, j, &field, &message);
            continue;
        }
        // Middleware files come first and keep their own field.
        let script = read.scripts.iter().position(|s| s.field == field);
        let Some(i) = script.filter(|_| field.starts_with("version_data.")) else {
            return Err(LoadError::new(&spec.file, field, message));
        };
        let script = read.scripts.remove(i);
        for j in 0..read.endpoints.len() {
            if read.endpoint_files[j] == script.file {
                read.endpoint_files[j] = PathBuf::new();
                read.script_errors[j] = Some((field.clone(), message.clone()));
            }
        }
    }
}

/// Tyk logs a script it cannot load even when the endpoint still serves
/// (its function defined by another script): so do we, once.
fn log_served_despite(spec: &ApiSpec, read: &ApiScripts) {
    for (j, error) in read.script_errors.iter().enumerate() {
        if let Some((field, message)) = error {
            tracing::warn!(
                "{}: {field}: {message}; virtual endpoint {:?} still serves: another script defines the function (Tyk's scripts share one VM)",
                spec.file.display(),
                read.endpoints[j].0
            );
        }
    }
}

/// Moves loaded endpoint `j` to the broken ones.
fn set_aside(spec: &ApiSpec, read: &mut ApiScripts, j: usize, field: &str, message: &str) {
    read.endpoints.remove(j);
    read.endpoint_files.remove(j);
    read.script_errors.remove(j);
    read.sessions.remove(j);
    for (at, slot) in read.slots.iter_mut().enumerate() {
        match slot {
            Slot::Live(k) if *k == j => {
                *slot = broken(spec, &spec.virtual_endpoints[at], field, message);
            }
            Slot::Live(k) if *k > j => *k -= 1,
            _ => {}
        }
    }
}

/// The chain's endpoints, one per slot in the definition's order: `live`
/// makes a loaded one from its index in `endpoints` and its name.
pub(crate) fn endpoint_chain(
    slots: &[Slot],
    names: &[(String, String)],
    mut live: impl FnMut(usize, &str) -> Box<dyn Endpoint>,
) -> Vec<Box<dyn Endpoint>> {
    slots
        .iter()
        .map(|slot| match slot {
            Slot::Live(j) => live(*j, &names[*j].0),
            Slot::Broken { name, reason } => Box::new(BrokenEndpoint {
                name: name.clone(),
                reason: reason.clone(),
            }) as Box<dyn Endpoint>,
        })
        .collect()
}

/// A virtual endpoint whose script could not load: each call fails with
/// the reason (logged per request by the chain, as Tyk logs
/// "Error during virtual endpoint execution").
struct BrokenEndpoint {
    name: String,
    reason: String,
}

impl Endpoint for BrokenEndpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(&'a self, _req: &'a MwRequest) -> MwFutureOf<'a, MwResponse> {
        let e = MwError::not_loaded(format!("not loaded: {}", self.reason));
        Box::pin(std::future::ready(Err(e)))
    }
}

fn read_file(spec: &ApiSpec, file: &std::path::Path, field: &str) -> Result<String, LoadError> {
    std::fs::read_to_string(file).map_err(|err| {
        LoadError::new(
            &spec.file,
            field,
            format!(
                "cannot read {}{}: {err}",
                file.display(),
                crate::native::library::resolved_against(file)
            ),
        )
    })
}

/// Gives each middleware file its own scope (`scope.rs`), serving the
/// request and response entries whose `path` it is. A file that serves no
/// entry (a virtual endpoint's source) is left as written: its functions
/// stay global, where `response_function_name` finds them.
pub(crate) fn scope(read: &mut ApiScripts) {
    let named: Vec<(String, String)> = read.entries.iter().chain(&read.response).cloned().collect();
    for s in &mut read.scripts {
        let served = super::scope::served(&named, &read.entry_files, &s.file);
        if !served.is_empty() {
            s.text = super::scope::wrap(&s.text, &served);
        }
    }
}
