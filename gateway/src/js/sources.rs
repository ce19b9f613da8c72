//! Reading an API's scripts at load, for either engine: every middleware
//! entry's file (when the API's driver is JS) and every virtual endpoint's
//! source (a file, or a base64 blob in the definition), each distinct
//! script once, with the definition field that named it for errors.

use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::vm::ScriptFile;
use crate::config::{ApiSpec, Driver, Hook, LoadError, VirtualSource};

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
    /// `(response_function_name, field)` per virtual endpoint.
    pub(crate) endpoints: Vec<(String, String)>,
    /// The file of each of `entries`, then of each of `response`.
    pub(crate) entry_files: Vec<PathBuf>,
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
        let field = format!("{}.function_source_uri", v.field);
        let (file, text) = match &v.source {
            VirtualSource::File(path) => {
                let file = PathBuf::from(path);
                let text = read_file(spec, &file, &field)?;
                (file, text)
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
                (PathBuf::from(format!("<{} blob>", v.field)), text)
            }
        };
        if !out.scripts.iter().any(|s| s.file == file) {
            out.scripts.push(ScriptFile {
                file,
                field: field.clone(),
                text,
            });
        }
        out.endpoints.push((
            v.function.clone(),
            format!("{}.response_function_name", v.field),
        ));
    }
    Ok(out)
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
