//! The gateway's native plugin ABI, and a safe Rust SDK on top of it.
//!
//! A native middleware is a function in a dynamic library that the gateway
//! loads with `driver: "goplugin"` (or `"native"`) and calls once per request,
//! the way Tyk calls a Go plugin's `func(http.ResponseWriter, *http.Request)`.
//! Go plugins only load into a gateway built by the same toolchain; this ABI is
//! plain C ([`abi`], and `include/gw_plugin.h` for C authors), versioned, and
//! checked at load, so a plugin survives compiler upgrades and languages.
//!
//! # Layout
//!
//! - [`abi`]: the `#[repr(C)]` types, the host callback table, the version.
//! - [`Request`]: the safe view of one request inside one call.
//! - [`export_plugin!`]: publishes Rust functions under the symbol names an
//!   API definition uses, catching panics at the boundary.
//!
//! # Example
//!
//! To try this: 1. make a `cdylib` crate depending on `plugin-sdk`; 2. put
//! the code below in its `lib.rs`; 3. point an API definition's
//! `custom_middleware.pre[0]` at the built `.so` with `"name": "AddHeader"`.
//!
//! ```
//! use plugin_sdk::{export_plugin, PluginError, Request};
//!
//! fn add_header(req: &mut Request<'_>) -> Result<(), PluginError> {
//!     req.set_header("X-Custom-GoPlugin", "hello-from-go-plugin")
//! }
//!
//! export_plugin!(AddHeader => add_header);
//! ```
#![deny(missing_docs)]

pub mod abi;
mod request;

pub use request::{LogLevel, PluginError, Request};

/// Publishes middleware functions under C symbol names, plus the ABI version
/// symbol the host checks at load. Use it once per library.
///
/// Each handler is `fn(&mut Request<'_>) -> Result<(), PluginError>`, for
/// the request phase or, named in `custom_middleware.response`, the
/// response phase (then use the `response_*` methods of [`Request`]). An
/// `Err` or a panic becomes [`abi::GW_ERROR`] with the message handed to the
/// host (the client gets Tyk's 500, the gateway logs the message); a panic
/// never unwinds into the host.
#[macro_export]
macro_rules! export_plugin {
    ($($symbol:ident => $handler:path),+ $(,)?) => {
        /// The plugin ABI version this library was built against.
        #[unsafe(no_mangle)]
        pub extern "C" fn gw_plugin_abi_version() -> u32 {
            $crate::abi::ABI_VERSION
        }
        /// The ABI minor version (which appended callbacks it knows).
        #[unsafe(no_mangle)]
        pub extern "C" fn gw_plugin_abi_minor() -> u32 {
            $crate::abi::ABI_MINOR
        }
        $(
            /// A gateway middleware (see `plugin_sdk::export_plugin!`).
            ///
            /// # Safety
            /// Called by the gateway with its callback table and a request
            /// handle valid for the duration of the call.
            #[unsafe(no_mangle)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $symbol(
                host: *const $crate::abi::GwHost,
                req: *mut $crate::abi::GwRequest,
            ) -> i32 {
                // SAFETY: forwarded verbatim from the host, per the ABI.
                unsafe { $crate::__private::call(host, req, $handler) }
            }
        )+
    };
}

#[doc(hidden)]
pub mod __private {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use crate::abi::{GwHost, GwRequest, ABI_VERSION, GW_CONTINUE, GW_ERROR, GW_HOST_BASE_SIZE};
    use crate::{PluginError, Request};

    /// The body of every exported symbol: check the table, run the handler,
    /// turn an error or a panic into `GW_ERROR`.
    ///
    /// # Safety
    /// `host` and `req` must be what the host passed to the symbol.
    pub unsafe fn call(
        host: *const GwHost,
        req: *mut GwRequest,
        handler: fn(&mut Request<'_>) -> Result<(), PluginError>,
    ) -> i32 {
        if host.is_null() || req.is_null() {
            return GW_ERROR;
        }
        // SAFETY: non-null, and the host keeps the table alive for the call.
        let table = unsafe { &*host };
        // A table shorter than version 1's base would make us read past its
        // end (callbacks appended later are checked where they are used);
        // with a different version we cannot even trust `set_error`'s offset.
        if table.abi_version != ABI_VERSION || (table.size as usize) < GW_HOST_BASE_SIZE {
            return GW_ERROR;
        }
        // SAFETY: checked above; `req` is valid for this call.
        let mut request = unsafe { Request::from_raw(table, req) };
        // Unwinding out of an `extern "C"` function aborts the whole gateway,
        // so every panic stops here. AssertUnwindSafe: after a panic we only
        // report an error; the half-edited request is failed with 500.
        match catch_unwind(AssertUnwindSafe(|| handler(&mut request))) {
            Ok(Ok(())) => GW_CONTINUE,
            Ok(Err(e)) => {
                request.set_error(e.message());
                GW_ERROR
            }
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string payload".to_string());
                request.set_error(&format!("plugin panicked: {what}"));
                GW_ERROR
            }
        }
    }
}
