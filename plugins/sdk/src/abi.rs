//! The raw C ABI, version [`ABI_VERSION`]. `include/gw_plugin.h` declares the
//! same types for C authors; the two must change together.
//!
//! # The contract in one paragraph
//!
//! A plugin library exports `uint32_t gw_plugin_abi_version(void)`, which the
//! host calls once at load and refuses the library unless it returns
//! [`ABI_VERSION`], and one [`GwPluginFn`] per middleware under the name the
//! API definition gives (`custom_middleware.pre[i].name`). The host calls a
//! middleware on a gateway worker thread with its callback table
//! ([`GwHost`]) and an opaque request handle ([`GwRequest`]) that is valid
//! only for the duration of that call. The plugin reads and edits the request
//! only through the callbacks; it returns [`GW_CONTINUE`] or [`GW_ERROR`].
//!
//! A response entry (`custom_middleware.response[i].name`, ABI 1.2) is a
//! function of the same type, called after the upstream answered: the
//! `response_*` callbacks read and edit the upstream's answer (its status,
//! headers and whole body); the request callbacks read the request as it
//! went upstream (without its body), and editing it is refused. Outside
//! the response phase the `response_*` callbacks find nothing and refuse
//! edits.
//!
//! ABI 1.3 adds two request-phase edits a Tyk Go plugin makes through its
//! real `*http.Request` and `http.ResponseWriter`: `set_method` (the method
//! that goes upstream) and `add_client_header` (a header for the answer the
//! client gets, added before the upstream's, as Tyk's `rw.Header().Add`
//! before the request is proxied).
//!
//! # Memory
//!
//! Strings are [`GwStr`] (pointer + length, not NUL-terminated, borrowed).
//! - Strings the host returns point into the request and stay valid until the
//!   next editing callback on the same request, or the end of the call,
//!   whichever comes first. Copy them if you need them longer.
//! - Strings the plugin passes in are copied by the host before it returns;
//!   the plugin keeps ownership.
//!
//! # Errors
//!
//! Editing callbacks return [`GW_OK`] or [`GW_REJECTED`]. A rejected edit (a
//! header name or value that is not valid HTTP, a path that is not a path, a
//! status out of range) is not applied *and fails the request*: the client
//! gets 500 whatever the plugin returns afterwards, so invalid data can never
//! reach the upstream because a plugin ignored a return code.

use core::marker::PhantomData;

/// The ABI version this SDK and the host speak.
///
/// # The version rule
///
/// - Bump it on any *incompatible* change: a field of [`GwHost`] moved,
///   removed or retyped, a type's layout changed, a callback's meaning
///   changed. Host and plugin then refuse each other at load.
/// - An *additive* change keeps the version: new callbacks are appended to
///   the end of [`GwHost`], never inserted, and its `size` grows. A plugin
///   checks `size` before it uses a callback newer than [`GW_HOST_BASE_SIZE`]
///   (the SDK does it for you: [`GwHost::has`]), so a plugin built against a
///   newer SDK still runs on an older host, and an old plugin on a new host.
///
/// History: 1.0 had the callbacks up to `set_error`; 1.1 appended `api_id`,
/// `config_data`, `log` and `call_budget_us`; 1.2 appended the response
/// phase's callbacks (`response_status` .. `set_response_body`) and the
/// [`ABI_MINOR_SYMBOL`] export; 1.3 appended `set_method` and
/// `add_client_header`.
pub const ABI_VERSION: u32 = 1;

/// The minor version of [`ABI_VERSION`] this SDK speaks: which appended
/// callbacks it knows. A library exports it as [`ABI_MINOR_SYMBOL`]; the
/// host serves a library as a response entry (`custom_middleware.response`)
/// only from minor 2 on, so a plugin written for the request phase cannot
/// be named as a response hook by mistake and silently edit a request that
/// has already been sent. (Minor 3's callbacks are request-phase ones: a
/// plugin checks the table for them, the host needs no minor to serve it.)
pub const ABI_MINOR: u32 = 3;

/// The symbol, of type [`GwAbiVersionFn`], that returns [`ABI_MINOR`]. A
/// library without it is minor 1 or older.
pub const ABI_MINOR_SYMBOL: &str = "gw_plugin_abi_minor";

/// `size` of a version-1 table with no additions (up to and including
/// `set_error`): every host speaking version 1 has at least these.
pub const GW_HOST_BASE_SIZE: usize = core::mem::offset_of!(GwHost, api_id);

/// `log` levels, most to least severe.
pub const GW_LOG_ERROR: u32 = 0;
/// Warning level.
pub const GW_LOG_WARN: u32 = 1;
/// Info level.
pub const GW_LOG_INFO: u32 = 2;
/// Debug level.
pub const GW_LOG_DEBUG: u32 = 3;

/// The symbol a plugin library exports, of type [`GwAbiVersionFn`].
pub const ABI_VERSION_SYMBOL: &str = "gw_plugin_abi_version";

/// Plugin return value: carry on (run the next middleware, then proxy; or
/// send the response set with [`GwHost::respond`]).
pub const GW_CONTINUE: i32 = 0;
/// Plugin return value: the middleware failed; the client gets 500.
pub const GW_ERROR: i32 = 1;

/// Callback return value: done.
pub const GW_OK: i32 = 0;
/// Callback return value: the edit was refused and the request will fail.
pub const GW_REJECTED: i32 = -1;

/// Query lookups: the request has a query string (possibly empty).
pub const GW_FOUND: i32 = 1;
/// Query and header lookups: nothing there.
pub const GW_NOT_FOUND: i32 = 0;

/// A borrowed byte string: `len` bytes at `ptr`, no NUL terminator.
/// `ptr` may be dangling (or NULL) when `len` is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GwStr {
    /// First byte.
    pub ptr: *const u8,
    /// Number of bytes.
    pub len: usize,
}

impl GwStr {
    /// Borrows `bytes` for a call into the host.
    pub fn new(bytes: &[u8]) -> GwStr {
        GwStr {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The empty string.
    pub const EMPTY: GwStr = GwStr {
        ptr: core::ptr::NonNull::<u8>::dangling().as_ptr(),
        len: 0,
    };

    /// Views the bytes.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes that outlive `'a` (or `len`
    /// must be 0).
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            &[]
        } else {
            // SAFETY: the caller guarantees ptr..ptr+len is live for 'a.
            unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
        }
    }
}

/// One header, as a name and a value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GwHeader {
    /// Header name.
    pub name: GwStr,
    /// Header value.
    pub value: GwStr,
}

/// The request, opaque to the plugin. Only ever seen behind a pointer.
#[repr(C)]
pub struct GwRequest {
    _private: [u8; 0],
    // Neither Send nor Sync, nor Unpin: it is the host's, for one call.
    _marker: PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

/// The host's callback table, passed to every middleware call.
///
/// `abi_version` and `size` come first and never move, so a plugin can check
/// that the table it got is at least as long as the one it was built with.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GwHost {
    /// [`ABI_VERSION`] of the host.
    pub abi_version: u32,
    /// `size_of::<GwHost>()` in the host.
    pub size: u32,
    /// The method (`GET`, ...).
    pub method: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// The path, still percent-encoded, starting with `/`.
    pub path: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// Writes the query string (without `?`) to `out` and returns
    /// [`GW_FOUND`], or returns [`GW_NOT_FOUND`] when the URL has no `?`.
    pub query: unsafe extern "C" fn(req: *const GwRequest, out: *mut GwStr) -> i32,
    /// Number of values of header `name` (case-insensitive); 0 if absent.
    pub header_count: unsafe extern "C" fn(req: *const GwRequest, name: GwStr) -> usize,
    /// Writes value number `index` of header `name` to `out`: [`GW_FOUND`],
    /// or [`GW_NOT_FOUND`] past the last value.
    pub header_get: unsafe extern "C" fn(
        req: *const GwRequest,
        name: GwStr,
        index: usize,
        out: *mut GwStr,
    ) -> i32,
    /// Number of header lines (each value of a repeated header counts).
    pub header_lines: unsafe extern "C" fn(req: *const GwRequest) -> usize,
    /// Writes header line number `index` (names lower-case) to `out`:
    /// [`GW_FOUND`], or [`GW_NOT_FOUND`] past the last line. Walking all lines
    /// is quadratic; it is meant for logging and debugging, not the hot path.
    pub header_line:
        unsafe extern "C" fn(req: *const GwRequest, index: usize, out: *mut GwHeader) -> i32,
    /// The whole (already buffered) request body.
    pub body: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// Replaces every value of header `name` with `value`.
    pub set_header: unsafe extern "C" fn(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32,
    /// Adds `value` to header `name`, keeping existing values.
    pub append_header: unsafe extern "C" fn(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32,
    /// Removes every value of header `name`; absent is fine.
    pub delete_header: unsafe extern "C" fn(req: *mut GwRequest, name: GwStr) -> i32,
    /// Replaces the path (must start with `/`, no `?` or `#`).
    pub set_path: unsafe extern "C" fn(req: *mut GwRequest, path: GwStr) -> i32,
    /// Replaces the query string (without `?`); a NULL `query` removes it.
    pub set_query: unsafe extern "C" fn(req: *mut GwRequest, query: *const GwStr) -> i32,
    /// Replaces the body; the host fixes `Content-Length`. At most 32 MiB
    /// (the host's bound on a body held for middleware): a longer one is
    /// refused and fails the request.
    pub set_body: unsafe extern "C" fn(req: *mut GwRequest, body: GwStr) -> i32,
    /// Answers the request: after the plugin returns [`GW_CONTINUE`], the
    /// chain stops, nothing is proxied, and the client gets exactly this
    /// status (200..=599), these headers and this body (at most 32 MiB, as
    /// `set_body`). Calling it again replaces the earlier answer.
    pub respond: unsafe extern "C" fn(
        req: *mut GwRequest,
        status: u16,
        headers: *const GwHeader,
        header_count: usize,
        body: GwStr,
    ) -> i32,
    /// Records why the middleware is about to return [`GW_ERROR`]; the host
    /// logs it with the API and symbol. The client still sees only Tyk's 500.
    pub set_error: unsafe extern "C" fn(req: *mut GwRequest, message: GwStr),

    // ---- ABI 1.1: appended; check `size` ([`GwHost::has`]) before use. ----
    /// The API's `api_id` (Tyk's `spec.APIID`).
    pub api_id: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// The API's `config_data` as JSON text (`{}` when the definition has
    /// none), the same object Tyk hands JS as `spec.config_data` and Go
    /// plugins through `ctx.GetDefinition(r).ConfigData`. Valid for the
    /// whole call (it never changes while the API is loaded).
    pub config_data: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// Logs `message` through the gateway's log (RUST_LOG), tagged with the
    /// API and the middleware, at `level` ([`GW_LOG_ERROR`] ..
    /// [`GW_LOG_DEBUG`]; larger values log as debug).
    pub log: unsafe extern "C" fn(req: *const GwRequest, level: u32, message: GwStr),
    /// The gateway's time budget for one middleware call, in microseconds
    /// (`--jsvm-timeout`, Tyk's `jsvm_timeout`). The host cannot interrupt
    /// native code; a plugin that can bound its own work (the Go adapter
    /// does) answers 500 itself when the budget runs out.
    pub call_budget_us: unsafe extern "C" fn(req: *const GwRequest) -> u64,

    // ---- ABI 1.2: the response phase; check `size` before use. ----
    /// The upstream's status; 0 outside the response phase.
    pub response_status: unsafe extern "C" fn(req: *const GwRequest) -> u16,
    /// Replaces the status the client gets (200..=999; an interim 1xx is refused).
    pub set_response_status: unsafe extern "C" fn(req: *mut GwRequest, status: u16) -> i32,
    /// Number of values of response header `name` (case-insensitive).
    pub response_header_count: unsafe extern "C" fn(req: *const GwRequest, name: GwStr) -> usize,
    /// Value number `index` of response header `name`, as `header_get`.
    pub response_header_get: unsafe extern "C" fn(
        req: *const GwRequest,
        name: GwStr,
        index: usize,
        out: *mut GwStr,
    ) -> i32,
    /// Number of response header lines.
    pub response_header_lines: unsafe extern "C" fn(req: *const GwRequest) -> usize,
    /// Response header line number `index`, as `header_line`.
    pub response_header_line:
        unsafe extern "C" fn(req: *const GwRequest, index: usize, out: *mut GwHeader) -> i32,
    /// Replaces every value of response header `name` with `value`.
    pub set_response_header:
        unsafe extern "C" fn(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32,
    /// Adds `value` to response header `name`.
    pub append_response_header:
        unsafe extern "C" fn(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32,
    /// Removes response header `name`; absent is fine.
    pub delete_response_header: unsafe extern "C" fn(req: *mut GwRequest, name: GwStr) -> i32,
    /// The upstream's whole (buffered) response body.
    pub response_body: unsafe extern "C" fn(req: *const GwRequest) -> GwStr,
    /// Replaces the response body; the host fixes `Content-Length`. At
    /// most 32 MiB, as `set_body`.
    pub set_response_body: unsafe extern "C" fn(req: *mut GwRequest, body: GwStr) -> i32,

    // ---- ABI 1.3: request-phase edits; check `size` before use. ----
    /// Replaces the method that goes upstream (`POST`, or any other HTTP
    /// token, case kept). A method that is not a token is refused, and the
    /// request fails with 500.
    pub set_method: unsafe extern "C" fn(req: *mut GwRequest, method: GwStr) -> i32,
    /// Adds `value` to header `name` of the answer the client gets for this
    /// request, whichever it is: the plugin's values come first and the
    /// answer's own are added after them (Tyk's `rw.Header().Add` from a
    /// Go plugin that does not write, then its proxy's `copyHeader`); on an
    /// answer the gateway or a later middleware writes, that answer's names
    /// win. Hop-by-hop names and `Content-Length` are dropped when the
    /// answer is sent: they would break its framing. Refused in the
    /// response phase (use `set_response_header` there).
    pub add_client_header:
        unsafe extern "C" fn(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32,
}

impl GwHost {
    /// True when this table has the callback that ends at byte `end` (use
    /// `offset_of!(GwHost, field) + size_of::<usize>()`): a host older than
    /// this SDK may not. Fields below [`GW_HOST_BASE_SIZE`] are always there.
    pub fn has(&self, end: usize) -> bool {
        self.size as usize >= end
    }
}

/// A middleware: the type of each symbol an API definition names.
pub type GwPluginFn = unsafe extern "C" fn(host: *const GwHost, req: *mut GwRequest) -> i32;

/// The type of the [`ABI_VERSION_SYMBOL`] export.
pub type GwAbiVersionFn = unsafe extern "C" fn() -> u32;
