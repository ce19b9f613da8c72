//! Listing the middleware a library exports, for "did you mean" errors.
//!
//! dlsym can only answer yes or no, so on a miss we read the library's
//! dynamic symbol table from the file (ELF, via the `object` crate) and keep
//! the defined global functions that could be middleware: not the ABI
//! version symbol, not the `_init`/`_fini`/`_`-prefixed plumbing every
//! toolchain adds. Only error paths run this; it never touches a request.

use std::path::Path;

use object::{Object, ObjectSymbol, SymbolKind};
use plugin_sdk::abi::ABI_VERSION_SYMBOL;

/// The exported function symbols of the library at `file`, sorted.
pub(crate) fn exported_functions(file: &Path) -> Result<Vec<String>, String> {
    let data = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let obj = object::File::parse(&*data).map_err(|e| e.to_string())?;
    let mut names: Vec<String> = obj
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.is_global() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| n != ABI_VERSION_SYMBOL && !n.starts_with('_') && !n.starts_with("gw_"))
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}
