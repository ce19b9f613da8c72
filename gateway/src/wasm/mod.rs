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
//! hence the shorter default, 1 s). An instance's linear memories and
//! tables together (a table element counted as the pointer it costs) may
//! not grow past the memory limit (64 MiB by default): the growing call
//! traps and the request gets 500; a module that needs more to start fails
//! its load. A module may define at most 8 memories and 8 tables. After
//! any trap the instance is replaced by a fresh one at once (module globals
//! and memory reset, as a JS context is rebuilt after a timeout), so the
//! next request works. Recursion is bounded by wasmtime's stack limit (a
//! trap too).
//!
//! That replacement runs the start lifecycle on the worker thread under the
//! same timeout, so one request can hold a worker for two timeouts. A start
//! that fails on a worker (the replacement, or the worker's first instance)
//! is logged and not tried again for a while (1 s, doubling to 60 s): the
//! entry answers 500 at once meanwhile (`driver.rs`), so a module that hangs
//! while starting does not cost a timeout per request.
//!
//! # Layout
//!
//! - [`abi`]: the ABI's status codes, enum values and map format.
//! - `module`: the engine, compilation, export and import checks.
//! - `host`: the host functions a module imports.
//! - `limits`: the memory budget of one instance (`--wasm-memory`).
//! - `request`: the header map with pseudo-headers over the request.
//! - `intern`: header names and values a module repeats, parsed once.
//! - `instance`: one instance on one worker; the lifecycle calls.
//! - `driver`: [`load`], and each worker's instances behind the middleware
//!   contract.
//!
//! # Without the `wasm` feature
//!
//! The cargo feature `wasm` (on by default) brings in wasmtime. Built
//! without it (`--no-default-features`), this module keeps only the limits
//! and the ABI's data, and [`load`] fails every wasm API closed with a
//! message saying so: the definitions still parse, the routes answer 500,
//! nothing falls through to a shorter listen path.

pub mod abi;
#[cfg(feature = "wasm")]
mod driver;
#[cfg(feature = "wasm")]
mod host;
#[cfg(feature = "wasm")]
mod instance;
#[cfg(feature = "wasm")]
mod limits;
#[cfg(feature = "wasm")]
mod module;
#[cfg(feature = "wasm")]
mod request;

use std::time::Duration;

#[cfg(feature = "wasm")]
pub use driver::load;

/// The limits every wasm call runs under (`--wasm-timeout`, `--wasm-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WasmLimits {
    /// Longest one middleware call may run.
    pub timeout: Duration,
    /// Most memory one instance may have, in bytes: its linear memories
    /// and its tables (a pointer per element) together.
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

/// Without the `wasm` feature: every wasm API fails closed, saying why.
#[cfg(not(feature = "wasm"))]
pub fn load(
    spec: &crate::config::ApiSpec,
    _limits: &WasmLimits,
) -> Result<std::sync::Arc<dyn crate::middleware::ChainFactory>, crate::config::LoadError> {
    Err(crate::config::LoadError::new(
        &spec.file,
        "custom_middleware.driver",
        "this gateway was built without WebAssembly support (cargo feature `wasm`, \
         on by default; it was built with --no-default-features)",
    ))
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
