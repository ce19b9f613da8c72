//! The safe view of one request during one middleware call.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use std::mem::{offset_of, size_of};
use std::time::Duration;

use crate::abi::{GwHeader, GwHost, GwRequest, GwStr, GW_FOUND, GW_OK};

/// How severe a [`Request::log`] line is.
/// The values are the ABI's `GW_LOG_*` constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum LogLevel {
    /// Something failed.
    Error = crate::abi::GW_LOG_ERROR,
    /// Something is off.
    Warn = crate::abi::GW_LOG_WARN,
    /// Worth knowing.
    Info = crate::abi::GW_LOG_INFO,
    /// For debugging.
    Debug = crate::abi::GW_LOG_DEBUG,
}

/// True when the host's table has callback `$field` (appended in ABI 1.1).
macro_rules! host_has {
    ($host:expr, $field:ident) => {
        $host.has(offset_of!(GwHost, $field) + size_of::<usize>())
    };
}

/// Why a middleware failed. The client gets Tyk's 500; the gateway logs this
/// message with the API and the symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginError(String);

impl PluginError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> PluginError {
        PluginError(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PluginError {}

impl From<&str> for PluginError {
    fn from(s: &str) -> Self {
        PluginError(s.to_string())
    }
}

impl From<String> for PluginError {
    fn from(s: String) -> Self {
        PluginError(s)
    }
}

/// One request, for the duration of one middleware call.
///
/// Reads borrow `&self` and edits take `&mut self`: the host may move the
/// bytes a read returned when the request is edited, and the borrow checker
/// then stops a plugin from holding a read across an edit, which is exactly
/// the ABI's lifetime rule.
pub struct Request<'a> {
    host: &'a GwHost,
    raw: NonNull<GwRequest>,
    // The handle is the host's, lent mutably for this call only.
    _call: PhantomData<&'a mut GwRequest>,
}

impl<'a> Request<'a> {
    /// Wraps the raw handle the host passed.
    ///
    /// # Safety
    /// `host` must be a table of this ABI version and `raw` the live request
    /// handle of the current call.
    pub unsafe fn from_raw(host: &'a GwHost, raw: *mut GwRequest) -> Request<'a> {
        Request {
            host,
            raw: NonNull::new(raw).expect("the host passes a non-null request"),
            _call: PhantomData,
        }
    }

    fn ptr(&self) -> *const GwRequest {
        self.raw.as_ptr()
    }

    fn text(&self, s: GwStr) -> &str {
        // SAFETY: the host returns strings valid until the next edit; `&self`
        // rules out edits while the result is borrowed.
        let bytes = unsafe { s.as_bytes() };
        // The host's method, path and query are Rust strings, so UTF-8; an
        // empty string is the safe answer if a foreign host ever breaks that.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    /// The method, e.g. `GET`.
    pub fn method(&self) -> &str {
        // SAFETY: valid table and handle (see `from_raw`).
        self.text(unsafe { (self.host.method)(self.ptr()) })
    }

    /// The path, still percent-encoded, starting with `/`.
    pub fn path(&self) -> &str {
        // SAFETY: as above.
        self.text(unsafe { (self.host.path)(self.ptr()) })
    }

    /// The query string without `?`; `None` when the URL has no `?`.
    pub fn query(&self) -> Option<&str> {
        let mut out = GwStr::EMPTY;
        // SAFETY: as above; `out` is a valid place to write.
        let found = unsafe { (self.host.query)(self.ptr(), &mut out) };
        (found == GW_FOUND).then(|| self.text(out))
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_at(name, 0)
    }

    fn header_at(&self, name: &str, index: usize) -> Option<&[u8]> {
        let mut out = GwStr::EMPTY;
        let key = GwStr::new(name.as_bytes());
        // SAFETY: valid table and handle; `name` and `out` live across the call.
        let found = unsafe { (self.host.header_get)(self.ptr(), key, index, &mut out) };
        // SAFETY: valid until the next edit, which `&self` rules out.
        (found == GW_FOUND).then(|| unsafe { out.as_bytes() })
    }

    /// How many values header `name` has (0 when absent).
    pub fn header_count(&self, name: &str) -> usize {
        // SAFETY: valid table and handle; `name` lives across the call.
        unsafe { (self.host.header_count)(self.ptr(), GwStr::new(name.as_bytes())) }
    }

    /// Every value of header `name`, in order.
    pub fn header_values<'r>(&'r self, name: &'r str) -> impl Iterator<Item = &'r [u8]> + 'r {
        (0..).map_while(move |i| self.header_at(name, i))
    }

    /// Every header line as (lower-case name, value), repeated names once per
    /// value. Quadratic in the number of headers: for debugging, not hot paths.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        (0..).map_while(move |i| {
            let mut out = GwHeader {
                name: GwStr::EMPTY,
                value: GwStr::EMPTY,
            };
            // SAFETY: as above.
            let found = unsafe { (self.host.header_line)(self.ptr(), i, &mut out) };
            // SAFETY: valid until the next edit, which `&self` rules out.
            (found == GW_FOUND).then(|| (self.text(out.name), unsafe { out.value.as_bytes() }))
        })
    }

    /// The whole request body.
    pub fn body(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { (self.host.body)(self.ptr()).as_bytes() }
    }

    /// Maps a callback's return code. `what` is only formatted on refusal:
    /// this runs on every edit of every request.
    fn edit(&mut self, rc: i32, what: impl FnOnce() -> String) -> Result<(), PluginError> {
        if rc == GW_OK {
            Ok(())
        } else {
            Err(PluginError(format!("the gateway refused {}", what())))
        }
    }

    /// Sets header `name` to `value`, replacing every earlier value.
    ///
    /// An invalid name or value (empty name, CR/LF) is refused, and the
    /// request then fails with 500 even if this error is ignored.
    pub fn set_header(&mut self, name: &str, value: impl AsRef<[u8]>) -> Result<(), PluginError> {
        let (n, v) = (GwStr::new(name.as_bytes()), GwStr::new(value.as_ref()));
        // SAFETY: valid table and handle; the host copies n and v.
        let rc = unsafe { (self.host.set_header)(self.raw.as_ptr(), n, v) };
        self.edit(rc, || format!("header {name:?}"))
    }

    /// Adds a value to header `name`, keeping the others.
    pub fn append_header(
        &mut self,
        name: &str,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PluginError> {
        let (n, v) = (GwStr::new(name.as_bytes()), GwStr::new(value.as_ref()));
        // SAFETY: as above.
        let rc = unsafe { (self.host.append_header)(self.raw.as_ptr(), n, v) };
        self.edit(rc, || format!("header {name:?}"))
    }

    /// Removes every value of header `name` (absent is fine).
    pub fn delete_header(&mut self, name: &str) -> Result<(), PluginError> {
        // SAFETY: as above.
        let rc =
            unsafe { (self.host.delete_header)(self.raw.as_ptr(), GwStr::new(name.as_bytes())) };
        self.edit(rc, || format!("header {name:?}"))
    }

    /// Replaces the path (must start with `/`; no `?` or `#`).
    pub fn set_path(&mut self, path: &str) -> Result<(), PluginError> {
        // SAFETY: as above.
        let rc = unsafe { (self.host.set_path)(self.raw.as_ptr(), GwStr::new(path.as_bytes())) };
        self.edit(rc, || format!("path {path:?}"))
    }

    /// Replaces the query string (`Some`, without `?`) or removes it (`None`).
    pub fn set_query(&mut self, query: Option<&str>) -> Result<(), PluginError> {
        let q = query.map(|q| GwStr::new(q.as_bytes()));
        let p = q.as_ref().map_or(std::ptr::null(), |q| q as *const GwStr);
        // SAFETY: as above; `p` is NULL or points at `q`, alive here.
        let rc = unsafe { (self.host.set_query)(self.raw.as_ptr(), p) };
        self.edit(rc, || format!("query {query:?}"))
    }

    /// Replaces the body; the gateway fixes `Content-Length`. At most 32 MiB:
    /// a longer one is refused and the request fails.
    pub fn set_body(&mut self, body: impl AsRef<[u8]>) -> Result<(), PluginError> {
        // SAFETY: as above.
        let rc = unsafe { (self.host.set_body)(self.raw.as_ptr(), GwStr::new(body.as_ref())) };
        self.edit(rc, || "the body".to_string())
    }

    /// Answers the request: when the middleware returns `Ok`, the chain
    /// stops, nothing is proxied, and the client gets exactly this. The
    /// body is at most 32 MiB, as [`Request::set_body`]'s.
    pub fn respond(
        &mut self,
        status: u16,
        headers: &[(&str, &str)],
        body: impl AsRef<[u8]>,
    ) -> Result<(), PluginError> {
        let lines: Vec<GwHeader> = headers
            .iter()
            .map(|(n, v)| GwHeader {
                name: GwStr::new(n.as_bytes()),
                value: GwStr::new(v.as_bytes()),
            })
            .collect();
        let body = GwStr::new(body.as_ref());
        // SAFETY: as above; `lines` outlives the call.
        let rc = unsafe {
            (self.host.respond)(self.raw.as_ptr(), status, lines.as_ptr(), lines.len(), body)
        };
        self.edit(rc, || format!("response status {status} or its headers"))
    }

    /// The API's `api_id`; `None` on a host older than ABI 1.1.
    pub fn api_id(&self) -> Option<&str> {
        // SAFETY: valid table and handle, and the callback is in the table.
        host_has!(self.host, api_id).then(|| self.text(unsafe { (self.host.api_id)(self.ptr()) }))
    }

    /// The API's `config_data` as JSON text (`{}` when the definition has
    /// none); `None` on a host older than ABI 1.1. Parse it with the JSON
    /// library of your choice.
    pub fn config_data(&self) -> Option<&str> {
        // SAFETY: as above.
        host_has!(self.host, config_data)
            .then(|| self.text(unsafe { (self.host.config_data)(self.ptr()) }))
    }

    /// Logs `message` through the gateway's log, tagged with the API and the
    /// middleware. A host older than ABI 1.1 has no log: the line is dropped.
    /// The gateway writes it on one line (control characters escaped, as
    /// `\n`) of at most 16 KiB, the rest cut and its length noted.
    pub fn log(&self, level: LogLevel, message: &str) {
        if host_has!(self.host, log) {
            let level = level as u32;
            // SAFETY: as above; the host copies the message.
            unsafe { (self.host.log)(self.ptr(), level, GwStr::new(message.as_bytes())) }
        }
    }

    /// The gateway's budget for one middleware call (`--jsvm-timeout`);
    /// `None` on a host older than ABI 1.1. The host cannot interrupt a
    /// native plugin: work that may run long should check this itself.
    pub fn call_budget(&self) -> Option<Duration> {
        // SAFETY: as above.
        host_has!(self.host, call_budget_us)
            .then(|| Duration::from_micros(unsafe { (self.host.call_budget_us)(self.ptr()) }))
    }

    // ---- The response phase (ABI 1.2) ----

    /// In a response entry, the upstream's status; `None` in the request
    /// phase or on a host older than ABI 1.2.
    pub fn response_status(&self) -> Option<u16> {
        if !host_has!(self.host, response_status) {
            return None;
        }
        // SAFETY: valid table and handle, and the callback is in the table.
        let status = unsafe { (self.host.response_status)(self.ptr()) };
        (status != 0).then_some(status)
    }

    /// The first value of response header `name` (case-insensitive).
    pub fn response_header(&self, name: &str) -> Option<&[u8]> {
        if !host_has!(self.host, response_header_get) {
            return None;
        }
        let mut out = GwStr::EMPTY;
        // SAFETY: as above; `out` is ours to write.
        let rc = unsafe {
            (self.host.response_header_get)(self.ptr(), GwStr::new(name.as_bytes()), 0, &mut out)
        };
        // SAFETY: valid until the next edit, which `&self` rules out.
        (rc == GW_FOUND).then(|| unsafe { out.as_bytes() })
    }

    /// Every response header line, names lower-case (empty outside the
    /// response phase).
    pub fn response_headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        let count = if host_has!(self.host, response_header_line) {
            // SAFETY: as above.
            unsafe { (self.host.response_header_lines)(self.ptr()) }
        } else {
            0
        };
        (0..count).filter_map(move |i| {
            let mut line = GwHeader {
                name: GwStr::EMPTY,
                value: GwStr::EMPTY,
            };
            // SAFETY: as above; `line` is ours to write.
            let rc = unsafe { (self.host.response_header_line)(self.ptr(), i, &mut line) };
            // SAFETY: valid until the next edit, which `&self` rules out.
            (rc == GW_FOUND).then(|| (self.text(line.name), unsafe { line.value.as_bytes() }))
        })
    }

    /// The upstream's whole response body (empty outside the response phase).
    pub fn response_body(&self) -> &[u8] {
        if !host_has!(self.host, response_body) {
            return &[];
        }
        // SAFETY: as above; valid until the next edit.
        unsafe { (self.host.response_body)(self.ptr()).as_bytes() }
    }

    /// The edit of an ABI 1.2 callback: refused on an older host.
    fn response_edit(
        &mut self,
        has: bool,
        call: impl FnOnce(&GwHost, *mut GwRequest) -> i32,
        what: impl FnOnce() -> String,
    ) -> Result<(), PluginError> {
        if !has {
            return Err(PluginError(format!(
                "this gateway has no response phase (ABI older than 1.2): cannot set {}",
                what()
            )));
        }
        let rc = call(self.host, self.raw.as_ptr());
        self.edit(rc, what)
    }

    /// Replaces the status the client gets.
    pub fn set_response_status(&mut self, status: u16) -> Result<(), PluginError> {
        let has = host_has!(self.host, set_response_status);
        // SAFETY: valid table and handle; called only when present.
        let call = |h: &GwHost, r| unsafe { (h.set_response_status)(r, status) };
        self.response_edit(has, call, || format!("response status {status}"))
    }

    /// Sets response header `name` to `value`, replacing earlier values.
    pub fn set_response_header(
        &mut self,
        name: &str,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PluginError> {
        let (n, v) = (GwStr::new(name.as_bytes()), GwStr::new(value.as_ref()));
        let has = host_has!(self.host, set_response_header);
        // SAFETY: as above; the host copies n and v.
        let call = |h: &GwHost, r| unsafe { (h.set_response_header)(r, n, v) };
        self.response_edit(has, call, || format!("response header {name:?}"))
    }

    /// Adds a value to response header `name`.
    pub fn append_response_header(
        &mut self,
        name: &str,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PluginError> {
        let (n, v) = (GwStr::new(name.as_bytes()), GwStr::new(value.as_ref()));
        let has = host_has!(self.host, append_response_header);
        // SAFETY: as above.
        let call = |h: &GwHost, r| unsafe { (h.append_response_header)(r, n, v) };
        self.response_edit(has, call, || format!("response header {name:?}"))
    }

    /// Removes response header `name` (absent is fine).
    pub fn delete_response_header(&mut self, name: &str) -> Result<(), PluginError> {
        let n = GwStr::new(name.as_bytes());
        let has = host_has!(self.host, delete_response_header);
        // SAFETY: as above.
        let call = |h: &GwHost, r| unsafe { (h.delete_response_header)(r, n) };
        self.response_edit(has, call, || format!("response header {name:?}"))
    }

    /// Replaces the response body; the gateway fixes `Content-Length`. At
    /// most 32 MiB, as [`Request::set_body`]'s.
    pub fn set_response_body(&mut self, body: impl AsRef<[u8]>) -> Result<(), PluginError> {
        let b = GwStr::new(body.as_ref());
        let has = host_has!(self.host, set_response_body);
        // SAFETY: as above; the host copies the body.
        let call = |h: &GwHost, r| unsafe { (h.set_response_body)(r, b) };
        self.response_edit(has, call, || "the response body".to_string())
    }

    // ---- Request-phase edits of ABI 1.3 ----

    /// Replaces the method that goes upstream (`"POST"`, or any other HTTP
    /// token). A method that is not a token is refused and the request then
    /// fails with 500; on a host older than ABI 1.3 this is an error.
    pub fn set_method(&mut self, method: &str) -> Result<(), PluginError> {
        let m = GwStr::new(method.as_bytes());
        let has = host_has!(self.host, set_method);
        // SAFETY: valid table and handle; called only when present.
        let call = |h: &GwHost, r| unsafe { (h.set_method)(r, m) };
        self.newer_edit(has, call, || format!("method {method:?}"))
    }

    /// Adds a value to header `name` of the answer the client gets for this
    /// request, as a Tyk Go plugin's `rw.Header().Add` before the request
    /// is proxied: these values come first and the upstream's own are added
    /// after them; on an answer the gateway or a later middleware writes,
    /// that answer's names win. Hop-by-hop names and `Content-Length` are
    /// dropped when the answer is sent. An error on a host older than ABI
    /// 1.3, and in the response phase (use `set_response_header` there).
    pub fn add_client_header(
        &mut self,
        name: &str,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PluginError> {
        let (n, v) = (GwStr::new(name.as_bytes()), GwStr::new(value.as_ref()));
        let has = host_has!(self.host, add_client_header);
        // SAFETY: valid table and handle; the host copies n and v.
        let call = |h: &GwHost, r| unsafe { (h.add_client_header)(r, n, v) };
        self.newer_edit(has, call, || format!("client header {name:?}"))
    }

    /// The edit of an ABI 1.3 callback: refused on an older host.
    fn newer_edit(
        &mut self,
        has: bool,
        call: impl FnOnce(&GwHost, *mut GwRequest) -> i32,
        what: impl FnOnce() -> String,
    ) -> Result<(), PluginError> {
        if !has {
            return Err(PluginError(format!(
                "this gateway is older than ABI 1.3: cannot set {}",
                what()
            )));
        }
        let rc = call(self.host, self.raw.as_ptr());
        self.edit(rc, what)
    }

    pub(crate) fn set_error(&mut self, message: &str) {
        // SAFETY: as above.
        unsafe { (self.host.set_error)(self.raw.as_ptr(), GwStr::new(message.as_bytes())) }
    }
}
