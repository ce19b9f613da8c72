//! Opening plugin libraries: once per path, checked against the ABI version,
//! and never closed.
//!
//! Why never closed: a Rust cdylib registers thread-local destructors and may
//! hand out `'static` data; `dlclose` under it is unsound, and Tyk does not
//! unload Go plugins either. So each library is leaked on first load and every
//! API that names the same file (by canonical path) shares it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use plugin_sdk::abi::{GwAbiVersionFn, GwPluginFn, ABI_VERSION, ABI_VERSION_SYMBOL};

/// A loaded, version-checked library, alive for the rest of the process.
pub(crate) type Lib = &'static Library;

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
}

/// Opens (or finds already open) the library at `path`, as written in the
/// definition; a relative path is resolved against the working directory.
pub(crate) fn open(path: &str) -> Result<Lib, OpenError> {
    let written = Path::new(path);
    let meta = std::fs::metadata(written).map_err(|e| {
        OpenError::Path(format!(
            "cannot open library {path:?}{}: {e}",
            resolved_against(written)
        ))
    })?;
    if meta.is_dir() {
        return Err(OpenError::Path(format!(
            "library {path:?} is a directory, not a shared library"
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
    // SAFETY: loading runs the library's initialisers; trusting the plugin
    // file is the premise of a native plugin host, as with Tyk's Go plugins.
    // RTLD_NOW: an unresolved import fails here, at load, instead of killing
    // the process on the first request that calls it. RTLD_LOCAL: one
    // plugin's symbols never satisfy another's.
    let lib = unsafe { Library::open(Some(&canonical), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| OpenError::Path(format!("cannot load library {path:?}: {e}")))?;
    check_version(path, &lib)?;
    let lib: Lib = Box::leak(Box::new(lib));
    cache.insert(canonical, lib);
    Ok(lib)
}

/// For a relative path, which directory it was looked up in: the gateway's
/// working directory, which is rarely where the definition file is.
pub(crate) fn resolved_against(path: &Path) -> String {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => {
            format!(
                " (relative, so resolved against the working directory {})",
                cwd.display()
            )
        }
        _ => String::new(),
    }
}

fn check_version(path: &str, lib: &Library) -> Result<(), OpenError> {
    // SAFETY: the ABI defines this symbol's type; a library exporting
    // something else under the name is lying about speaking the ABI.
    let version = unsafe { lib.get::<GwAbiVersionFn>(ABI_VERSION_SYMBOL) }.map_err(|e| {
        OpenError::Path(format!(
            "library {path:?} does not export {ABI_VERSION_SYMBOL:?}, so it is not a gateway plugin \
             (build it with plugin_sdk::export_plugin! or GW_PLUGIN_EXPORT_ABI_VERSION()): {e}"
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

/// Looks up middleware `symbol` in `lib`.
pub(crate) fn symbol(lib: Lib, path: &str, symbol: &str) -> Result<GwPluginFn, OpenError> {
    if symbol.contains('\0') {
        return Err(OpenError::Symbol(format!(
            "symbol {symbol:?} contains a NUL byte"
        )));
    }
    // SAFETY: every middleware symbol has type GwPluginFn by the ABI. The
    // library is never unloaded, so the bare function pointer stays valid.
    let f = unsafe { lib.get::<GwPluginFn>(symbol) }.map_err(|e| {
        OpenError::Symbol(format!(
            "library {path:?} does not export symbol {symbol:?}: {e}"
        ))
    })?;
    Ok(*f)
}

/// How many distinct libraries this process has loaded (for tests and logs).
pub fn loaded_count() -> usize {
    cache().lock().unwrap_or_else(|p| p.into_inner()).len()
}
