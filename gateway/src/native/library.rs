//! Opening plugin libraries: once per path, checked against the ABI version,
//! and never closed; and finding a middleware's entry in one.
//!
//! Why never closed: a Rust cdylib registers thread-local destructors and may
//! hand out `'static` data; `dlclose` under it is unsound, and Tyk does not
//! unload Go plugins either (a Go runtime cannot be unloaded at all). So each
//! library is leaked on first load and every API that names the same file (by
//! canonical path) shares it.
//!
//! Two kinds of library answer to a `name`:
//! - a plain plugin (Rust `export_plugin!`, C `gw_plugin.h`) exports the
//!   middleware under exactly that symbol;
//! - a Go adapter (`plugins/go-adapter/build.sh`, a Tyk Go plugin package
//!   compiled with `go build -buildmode=c-shared`) cannot export a symbol
//!   with the Go function's own name, so it exports one entry
//!   `gw_go_<Name>` per handler plus the marker [`GO_ADAPTER_SYMBOL`] listing
//!   the handlers. The definition keeps Tyk's `"name": "AddHeader"`.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use plugin_sdk::abi::{
    GwAbiVersionFn, GwPluginFn, ABI_MINOR_SYMBOL, ABI_VERSION, ABI_VERSION_SYMBOL,
};

/// The Go adapter's marker: `const char *gw_go_adapter_handlers(void)`
/// returns the handler names, comma-separated ("Go adapter, these handlers").
pub const GO_ADAPTER_SYMBOL: &str = "gw_go_adapter_handlers";
/// A Go adapter exports handler `Name` as `gw_go_Name`.
pub const GO_ENTRY_PREFIX: &str = "gw_go_";

/// A loaded, version-checked library, alive for the rest of the process.
pub(crate) struct Plugin {
    lib: Library,
    /// The canonical file, read again only to list symbols in an error.
    file: PathBuf,
    /// `Some(handlers)` when the library is a Go adapter.
    go_handlers: Option<Vec<String>>,
    /// Its [`ABI_MINOR_SYMBOL`]'s answer; 0 when it exports none (built
    /// before ABI 1.2).
    minor: u32,
}

impl Plugin {
    /// The ABI minor version the library was built against (0: before 1.2).
    pub(crate) fn minor(&self) -> u32 {
        self.minor
    }

    /// Whether the library is a Go adapter (`plugins/go-adapter`).
    pub(crate) fn is_go(&self) -> bool {
        self.go_handlers.is_some()
    }
}

pub(crate) type Lib = &'static Plugin;

/// Canonical path -> library. A `Mutex` suffices: it is taken only at load.
fn cache() -> &'static Mutex<HashMap<PathBuf, Lib>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Lib>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Why a library or symbol could not be used. `Path` errors belong to the
/// entry's `path` field, `Symbol` errors to its `name` field.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The file is missing, is a directory, is not a loadable library, or
    /// speaks another ABI version.
    Path(String),
    /// The library loaded but does not export the symbol.
    Symbol(String),
    /// The library cannot read the API's `config_data` (a Go adapter's is
    /// Tyk's object).
    ConfigData(String),
}

/// `path` as written, plus where a relative one was looked for: the user
/// wrote it relative to something, and it may not be the gateway's
/// working directory.
fn describe(path: &str) -> String {
    if Path::new(path).is_absolute() {
        return format!("{path:?}");
    }
    match std::env::current_dir() {
        Ok(cwd) => format!(
            "{path:?} (relative, resolved against the gateway's working directory {})",
            cwd.display()
        ),
        Err(_) => format!("{path:?} (relative, and the working directory is unreadable)"),
    }
}

/// Opens (or finds already open) the library at `path`, as written in the
/// definition; a relative path is resolved against the working directory.
pub(crate) fn open(path: &str) -> Result<Lib, OpenError> {
    let written = Path::new(path);
    let meta = std::fs::metadata(written)
        .map_err(|e| OpenError::Path(format!("cannot open library {}: {e}", describe(path))))?;
    if meta.is_dir() {
        return Err(OpenError::Path(format!(
            "library {} is a directory, not a shared library",
            describe(path)
        )));
    }
    // Canonical, hence absolute: dlopen would otherwise search
    // LD_LIBRARY_PATH for a bare file name instead of the working directory.
    let canonical = std::fs::canonicalize(written)
        .map_err(|e| OpenError::Path(format!("cannot resolve library {path:?}: {e}")))?;
    // Held across dlopen so two APIs loading the same file at once cannot
    // both open and leak it.
    let mut cache = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(lib) = cache.get(&canonical) {
        return Ok(lib);
    }
    // Loaded first where it can only kill a child: a library whose
    // initialisers end or hang the process (a Go init() that panics) fails
    // this API alone (preflight.rs).
    super::preflight::check_once(&canonical)
        .map_err(|why| OpenError::Path(format!("cannot load library {path:?}: {why}")))?;
    // SAFETY: loading runs the library's initialisers; trusting the plugin
    // file is the premise of a native plugin host, as with Tyk's Go plugins.
    // RTLD_NOW: an unresolved import fails here, at load, instead of killing
    // the process on the first request that calls it. RTLD_LOCAL: one
    // plugin's symbols never satisfy another's.
    let lib = unsafe { Library::open(Some(&canonical), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| OpenError::Path(format!("cannot load library {path:?}: {}", why(&e))))?;
    check_version(path, &lib)?;
    let go_handlers = go_handlers(&lib);
    // SAFETY: the ABI defines this symbol's type (that of the version one).
    let minor = unsafe { lib.get::<GwAbiVersionFn>(ABI_MINOR_SYMBOL) }
        .map(|f| unsafe { f() })
        .unwrap_or(0);
    let lib: Lib = Box::leak(Box::new(Plugin {
        lib,
        file: canonical.clone(),
        go_handlers,
        minor,
    }));
    cache.insert(canonical, lib);
    Ok(lib)
}

/// For a relative path, which directory it was looked up in: the gateway's
/// working directory, which is rarely where the definition file is.
pub(crate) fn resolved_against(path: &Path) -> String {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => {
            format!(
                " (relative, so resolved against the gateway's working directory {})",
                cwd.display()
            )
        }
        _ => String::new(),
    }
}

/// A `libloading` error with the system's reason: its own text is only
/// "dlopen failed" or "dlsym failed", and the reason (`undefined symbol:
/// ...`, `file too short`) is its source.
fn why(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(reason) => format!("{e}: {reason}"),
        None => e.to_string(),
    }
}

fn check_version(path: &str, lib: &Library) -> Result<(), OpenError> {
    // SAFETY: the ABI defines this symbol's type; a library exporting
    // something else under the name is lying about speaking the ABI.
    let version = unsafe { lib.get::<GwAbiVersionFn>(ABI_VERSION_SYMBOL) }.map_err(|e| {
        OpenError::Path(format!(
            "library {path:?} does not export {ABI_VERSION_SYMBOL:?}, so it is not a gateway plugin \
             (build it with plugin_sdk::export_plugin! or GW_PLUGIN_EXPORT_ABI_VERSION()): {}",
            why(&e)
        ))
    })?;
    // SAFETY: as above.
    let found = unsafe { version() };
    if found != ABI_VERSION {
        return Err(OpenError::Path(format!(
            "library {path:?} speaks plugin ABI version {found}, this gateway speaks {ABI_VERSION}; \
             rebuild the plugin against this gateway's plugin-sdk"
        )));
    }
    Ok(())
}

/// The handler list of a Go adapter; `None` for any other library.
fn go_handlers(lib: &Library) -> Option<Vec<String>> {
    // SAFETY: the marker's type is fixed by the adapter's generator; it
    // returns a static NUL-terminated string (or NULL).
    let marker = unsafe { lib.get::<unsafe extern "C" fn() -> *const c_char>(GO_ADAPTER_SYMBOL) };
    let list = unsafe { marker.ok()?() };
    if list.is_null() {
        return Some(Vec::new());
    }
    // SAFETY: non-null, NUL-terminated, static in the library.
    let text = unsafe { CStr::from_ptr(list) }.to_string_lossy();
    Some(
        text.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Looks up middleware `name` in `lib`: the symbol itself, or a Go
/// adapter's entry for the handler. A miss lists what the library has.
pub(crate) fn symbol(lib: Lib, path: &str, name: &str) -> Result<GwPluginFn, OpenError> {
    if name.contains('\0') {
        return Err(OpenError::Symbol(format!(
            "symbol {name:?} contains a NUL byte"
        )));
    }
    // The ABI's own symbols have other types: called as a middleware, one
    // would be called with an argument it does not take (and its answer
    // read as a status). Taken as middleware before.
    if name.starts_with("gw_plugin_") || name.starts_with("gw_go_") {
        return Err(OpenError::Symbol(format!(
            "{name:?} in library {path:?} is one of the plugin ABI's own symbols, not a \
             middleware"
        )));
    }
    let wanted = match &lib.go_handlers {
        Some(handlers) if !handlers.iter().any(|h| h == name) => {
            return Err(OpenError::Symbol(format!(
                "library {path:?} is a Go plugin adapter with the handlers [{}]; it has no \
                 handler {name:?}{}",
                handlers.join(", "),
                did_you_mean(name, handlers)
            )))
        }
        Some(_) => format!("{GO_ENTRY_PREFIX}{name}"),
        None => name.to_string(),
    };
    // SAFETY: every middleware symbol has type GwPluginFn by the ABI. The
    // library is never unloaded, so the bare function pointer stays valid.
    match unsafe { lib.lib.get::<GwPluginFn>(wanted.as_bytes()) } {
        Ok(f) => Ok(*f),
        Err(e) => Err(OpenError::Symbol(missing_symbol(lib, path, name, &e))),
    }
}

/// "does not export X", with the plugin symbols it does export.
fn missing_symbol(lib: Lib, path: &str, name: &str, e: &libloading::Error) -> String {
    match super::symbols::exported_functions(&lib.file) {
        Ok(found) if found.is_empty() => {
            format!("library {path:?} does not export symbol {name:?}, nor any other middleware")
        }
        Ok(found) => format!(
            "library {path:?} does not export symbol {name:?}; it exports [{}]{}",
            found.join(", "),
            did_you_mean(name, &found)
        ),
        Err(why) => format!(
            "library {path:?} does not export symbol {name:?}: {e} (listing its symbols \
             failed: {why})"
        ),
    }
}

/// " (did you mean \"Stamp\"?)" when one candidate is close to `name`.
fn did_you_mean(name: &str, candidates: &[String]) -> String {
    let lower = name.to_ascii_lowercase();
    let close = candidates
        .iter()
        .find(|c| c.to_ascii_lowercase() == lower)
        .or_else(|| {
            candidates
                .iter()
                .map(|c| (strsim::levenshtein(c, name), c))
                .filter(|(d, c)| *d <= 2.max(c.len() / 3))
                .min_by_key(|(d, _)| *d)
                .map(|(_, c)| c)
        });
    close.map_or_else(String::new, |c| format!(" (did you mean {c:?}?)"))
}
