//! The host side of the ABI: the callback table a plugin gets, and the
//! per-call context its opaque `GwRequest` handle points at.
//!
//! Every callback is `extern "C"`, so a panic in one would abort the gateway.
//! They are written not to panic (all input is validated, never unwrapped)
//! and additionally run inside `guard`, which turns a panic into a failed
//! request instead of a dead process.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use plugin_sdk::abi::{
    GwHeader, GwHost, GwRequest, GwStr, ABI_VERSION, GW_FOUND, GW_LOG_ERROR, GW_LOG_INFO,
    GW_LOG_WARN, GW_NOT_FOUND, GW_OK, GW_REJECTED,
};

use crate::intern::{BadPair, HeaderCache};
use crate::middleware::{HeadBudget, MwResponse, ReqMut, MAX_CLIENT_HEADER_LINES, MAX_HEAD_TEXT};
use crate::proxy::MAX_BUFFERED_BODY;

/// What a plugin may read about the API it serves: fixed at load, shared by
/// every call of every entry of the API.
#[derive(Debug)]
pub(crate) struct ApiInfo {
    /// `api_id`.
    pub api_id: String,
    /// `config_data` serialised once at load (`{}` when absent), so a call
    /// hands out a borrowed string instead of serialising per request.
    pub config_json: String,
    /// `--jsvm-timeout` in microseconds, the budget of one call.
    pub budget_us: u64,
}

/// What one call can touch and what it leaves behind. A `*mut GwRequest` is a
/// `*mut Ctx` in disguise, valid only while the plugin function runs.
/// (`'h` is the lent request's, [`ReqMut`].)
pub(crate) struct Ctx<'a, 'h> {
    pub req: ReqMut<'a, 'h>,
    /// The API, for `api_id`, `config_data`, `log` and `call_budget_us`.
    pub api: &'a ApiInfo,
    /// The entry's `name`, to tag log lines.
    pub name: &'a str,
    /// Set by `respond`: the answer that short-circuits the chain. Boxed,
    /// as [`Flow::Respond`](crate::middleware::Flow) wants it: unboxed, the
    /// context was too large to build without a `memcpy` on every call.
    pub response: Option<Box<MwResponse>>,
    /// Set by the first refused edit: the request fails whatever the plugin
    /// returns, so invalid data cannot reach the upstream.
    pub fault: Option<String>,
    /// Set by `set_error`: the plugin's own explanation of a `GW_ERROR`.
    pub error: Option<String>,
    /// In a response entry: the upstream's answer, which the `response_*`
    /// callbacks edit (and the request is then read-only).
    pub resp: Option<&'a mut MwResponse>,
    /// The entry's parsed header names and values (`intern.rs`): the
    /// request edits look a plugin's constant strings up here instead of
    /// parsing and copying them on every call.
    pub cache: &'a mut HeaderCache,
    /// What is left of this call's header text ([`take_text`]).
    pub head: HeadBudget,
}

/// The one callback table, shared by every call on every thread (it is all
/// function pointers and constants, so it can be a `static`).
pub(crate) static HOST: GwHost = GwHost {
    abi_version: ABI_VERSION,
    size: std::mem::size_of::<GwHost>() as u32,
    method,
    path,
    query,
    header_count,
    header_get,
    header_lines,
    header_line,
    body,
    set_header,
    append_header,
    delete_header,
    set_path,
    set_query,
    set_body,
    respond,
    set_error,
    api_id,
    config_data,
    log,
    call_budget_us,
    response_status: super::response::response_status,
    set_response_status: super::response::set_response_status,
    response_header_count: super::response::response_header_count,
    response_header_get: super::response::response_header_get,
    response_header_lines: super::response::response_header_lines,
    response_header_line: super::response::response_header_line,
    set_response_header: super::response::set_response_header,
    append_response_header: super::response::append_response_header,
    delete_response_header: super::response::delete_response_header,
    response_body: super::response::response_body,
    set_response_body: super::response::set_response_body,
    set_method,
    add_client_header,
};

pub(super) fn s(bytes: &[u8]) -> GwStr {
    GwStr::new(bytes)
}

/// Runs a callback body, turning a panic into `on_panic` (and, for editing
/// callbacks, a fault) instead of unwinding into C.
pub(super) fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// # Safety
/// `req` must be the handle of a live call (see `Ctx`).
pub(super) unsafe fn ctx<'a>(req: *const GwRequest) -> &'a Ctx<'a, 'a> {
    // SAFETY: per the function's contract.
    unsafe { &*(req as *const Ctx<'a, 'a>) }
}

/// # Safety
/// As for `ctx`, and no other reference to the context is live.
unsafe fn ctx_mut<'a>(req: *mut GwRequest) -> &'a mut Ctx<'a, 'a> {
    // SAFETY: per the function's contract.
    unsafe { &mut *(req as *mut Ctx<'a, 'a>) }
}

/// # Safety
/// `g` must describe readable memory for the duration of the callback.
pub(super) unsafe fn bytes<'a>(g: GwStr) -> &'a [u8] {
    // SAFETY: per the function's contract (the plugin's own buffer).
    unsafe { g.as_bytes() }
}

unsafe extern "C" fn method(req: *const GwRequest) -> GwStr {
    // SAFETY (all callbacks): the plugin passes back the handle it was given.
    guard(GwStr::EMPTY, || {
        s(unsafe { ctx(req) }.req.method().as_str().as_bytes())
    })
}

unsafe extern "C" fn path(req: *const GwRequest) -> GwStr {
    guard(GwStr::EMPTY, || {
        s(unsafe { ctx(req) }.req.path().as_bytes())
    })
}

unsafe extern "C" fn query(req: *const GwRequest, out: *mut GwStr) -> i32 {
    guard(GW_NOT_FOUND, || match unsafe { ctx(req) }.req.query() {
        Some(q) if !out.is_null() => {
            // SAFETY: non-null, and the plugin gave us a place to write.
            unsafe { out.write(s(q.as_bytes())) };
            GW_FOUND
        }
        _ => GW_NOT_FOUND,
    })
}

/// Header lookups by a name that is not valid UTF-8 or not a valid header
/// name simply find nothing: a read never fails the request.
pub(super) fn lookup<'h>(
    headers: &'h HeaderMap,
    name: GwStr,
) -> Option<http::header::GetAll<'h, HeaderValue>> {
    // SAFETY: the name is the plugin's buffer, alive during the callback.
    let name = std::str::from_utf8(unsafe { bytes(name) }).ok()?;
    Some(headers.get_all(name))
}

unsafe extern "C" fn header_count(req: *const GwRequest, name: GwStr) -> usize {
    guard(0, || {
        lookup(unsafe { ctx(req) }.req.headers(), name).map_or(0, |all| all.iter().count())
    })
}

unsafe extern "C" fn header_get(
    req: *const GwRequest,
    name: GwStr,
    index: usize,
    out: *mut GwStr,
) -> i32 {
    guard(GW_NOT_FOUND, || {
        let headers = unsafe { ctx(req) }.req.headers();
        match lookup(headers, name).and_then(|all| all.iter().nth(index)) {
            Some(v) if !out.is_null() => {
                // SAFETY: non-null place the plugin gave us.
                unsafe { out.write(s(v.as_bytes())) };
                GW_FOUND
            }
            _ => GW_NOT_FOUND,
        }
    })
}

unsafe extern "C" fn header_lines(req: *const GwRequest) -> usize {
    guard(0, || unsafe { ctx(req) }.req.headers().len())
}

unsafe extern "C" fn header_line(req: *const GwRequest, index: usize, out: *mut GwHeader) -> i32 {
    guard(GW_NOT_FOUND, || {
        match unsafe { ctx(req) }.req.headers().iter().nth(index) {
            Some((n, v)) if !out.is_null() => {
                let line = GwHeader {
                    name: s(n.as_str().as_bytes()),
                    value: s(v.as_bytes()),
                };
                // SAFETY: non-null place the plugin gave us.
                unsafe { out.write(line) };
                GW_FOUND
            }
            _ => GW_NOT_FOUND,
        }
    })
}

unsafe extern "C" fn body(req: *const GwRequest) -> GwStr {
    guard(GwStr::EMPTY, || s(unsafe { ctx(req) }.req.body()))
}

/// An edit of the request: refused in the response phase, when the request
/// has already gone upstream.
fn edit(req: *mut GwRequest, f: impl FnOnce(&mut Ctx<'_, '_>) -> Result<(), String>) -> i32 {
    any_edit(req, |c| {
        if c.resp.is_some() {
            return Err(
                "a response entry cannot edit the request: it was already sent upstream (use the response_* callbacks)"
                    .to_string(),
            );
        }
        f(c)
    })
}

/// Runs an edit; a refusal (or a panic) records a fault that fails the
/// request. Only the first fault is kept: it is the one to fix.
pub(super) fn any_edit(
    req: *mut GwRequest,
    f: impl FnOnce(&mut Ctx<'_, '_>) -> Result<(), String>,
) -> i32 {
    // SAFETY: the plugin passes back its handle; no read borrow outlives a
    // callback, so this is the only reference.
    let ctx = unsafe { ctx_mut(req) };
    // The request fails already: the rest of a plugin's edits are refused
    // at once (one that went on adding headers in a loop, ignoring the
    // refusal, cost a refusal's full work each time).
    if ctx.fault.is_some() {
        return GW_REJECTED;
    }
    let result = catch_unwind(AssertUnwindSafe(|| f(&mut *ctx)))
        .unwrap_or_else(|_| Err("the gateway failed applying an edit".to_string()));
    match result {
        Ok(()) => GW_OK,
        Err(why) => {
            ctx.fault.get_or_insert(why);
            GW_REJECTED
        }
    }
}

/// Takes a header's name and value from the call's [`MAX_HEAD_TEXT`],
/// before either is copied: every callback that keeps a header (the
/// request's, a response's, the client's, `respond`'s) calls it. A plugin
/// handing over one buffer under many names (a Go handler's
/// `Header().Set` of one string in a loop) had the host copy it each time.
pub(super) fn take_text(head: &mut HeadBudget, name: GwStr, value: GwStr) -> Result<(), String> {
    head.take(name.len, value.len).map_err(|_| past_head_text())
}

#[cold]
fn past_head_text() -> String {
    format!(
        "the plugin set more than {MAX_HEAD_TEXT} bytes (1 MiB) of header names and values \
         in one call, the most one call may hand the host"
    )
}

pub(super) fn header_pair(name: GwStr, value: GwStr) -> Result<(HeaderName, HeaderValue), String> {
    // SAFETY: the plugin's buffers, alive during the callback.
    let (name, value) = unsafe { (bytes(name), bytes(value)) };
    let n = HeaderName::from_bytes(name).map_err(|_| bad_name(name))?;
    let v = HeaderValue::from_bytes(value).map_err(|_| bad_value(&n, value))?;
    Ok((n, v))
}

/// [`header_pair`] through the entry's cache of names and values
/// ([`HeaderCache::pair`]): the same checks and errors.
#[inline(always)]
fn cached_pair(
    cache: &mut HeaderCache,
    name: GwStr,
    value: GwStr,
) -> Result<(HeaderName, HeaderValue), String> {
    // SAFETY: the plugin's buffers, alive during the callback.
    let (name, value) = unsafe { (bytes(name), bytes(value)) };
    cache.pair(name, value).map_err(|bad| match bad {
        BadPair::Name => bad_name(name),
        BadPair::Value(n) => bad_value(&n, value),
    })
}

/// The refusal of a header past what a header map holds (`http`'s
/// `HeaderMap` panics at 32,768 entries; its `try_` calls refuse).
#[cold]
pub(super) fn too_many(_: http::header::MaxSizeReached) -> String {
    "too many header fields: a request or response holds at most 32,768".to_string()
}

/// Refuses a body past `bound` before the host copies it
/// ([`crate::body::within`]): without it one call of `set_body` copied
/// whatever the plugin handed over, a gigabyte as readily as a byte.
pub(super) fn within(body: &[u8], bound: usize, callback: &str, what: &str) -> Result<(), String> {
    crate::body::within(body.len(), bound, callback, what)
}

#[cold]
fn too_many_client_headers() -> String {
    format!(
        "too many headers for the client's answer: a request's middleware adds at most \
         {MAX_CLIENT_HEADER_LINES} lines"
    )
}

#[cold]
fn bad_name(raw: &[u8]) -> String {
    format!("invalid header name {:?}", String::from_utf8_lossy(raw))
}

#[cold]
fn bad_value(name: &HeaderName, raw: &[u8]) -> String {
    format!(
        "invalid value {:?} for header {name}",
        String::from_utf8_lossy(raw)
    )
}

unsafe extern "C" fn set_header(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32 {
    edit(req, |c| {
        take_text(&mut c.head, name, value)?;
        let (n, v) = cached_pair(c.cache, name, value)?;
        c.req.headers_mut().try_insert(n, v).map_err(too_many)?;
        Ok(())
    })
}

unsafe extern "C" fn append_header(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32 {
    edit(req, |c| {
        take_text(&mut c.head, name, value)?;
        let (n, v) = cached_pair(c.cache, name, value)?;
        c.req.headers_mut().try_append(n, v).map_err(too_many)?;
        Ok(())
    })
}

unsafe extern "C" fn delete_header(req: *mut GwRequest, name: GwStr) -> i32 {
    edit(req, |c| {
        let (n, _) = cached_pair(c.cache, name, GwStr::EMPTY)?;
        c.req.headers_mut().remove(n);
        Ok(())
    })
}

unsafe extern "C" fn set_path(req: *mut GwRequest, path: GwStr) -> i32 {
    edit(req, |c| {
        // SAFETY: the plugin's buffer, alive during the callback.
        let raw = unsafe { bytes(path) };
        let bad = || format!("invalid path {:?}", String::from_utf8_lossy(raw));
        let text = std::str::from_utf8(raw).map_err(|_| bad())?;
        if !text.starts_with('/') || text.contains(['?', '#']) {
            return Err(bad());
        }
        PathAndQuery::try_from(text).map_err(|_| bad())?;
        c.req.set_path(text.to_string());
        Ok(())
    })
}

unsafe extern "C" fn set_query(req: *mut GwRequest, query: *const GwStr) -> i32 {
    edit(req, |c| {
        if query.is_null() {
            c.req.set_query(None);
            return Ok(());
        }
        // SAFETY: non-null pointer to the plugin's GwStr and buffer.
        let raw = unsafe { bytes(query.read()) };
        let bad = || format!("invalid query {:?}", String::from_utf8_lossy(raw));
        let text = std::str::from_utf8(raw).map_err(|_| bad())?;
        if text.contains('#') {
            return Err(bad());
        }
        PathAndQuery::try_from(format!("/?{text}").as_str()).map_err(|_| bad())?;
        c.req.set_query(Some(text.to_string()));
        Ok(())
    })
}

unsafe extern "C" fn set_body(req: *mut GwRequest, body: GwStr) -> i32 {
    edit(req, |c| {
        // SAFETY: the plugin's buffer, alive during the callback.
        let raw = unsafe { bytes(body) };
        within(
            raw,
            MAX_BUFFERED_BODY,
            "set_body",
            "a request body held for middleware",
        )?;
        let new = Bytes::copy_from_slice(raw);
        // The body is sent whole, so its length is known: a stale
        // Content-Length or a chunked Transfer-Encoding would corrupt it.
        c.req.set_body(new);
        Ok(())
    })
}

unsafe extern "C" fn respond(
    req: *mut GwRequest,
    status: u16,
    headers: *const GwHeader,
    count: usize,
    body: GwStr,
) -> i32 {
    edit(req, |c| {
        let status = StatusCode::from_u16(status)
            .ok()
            .filter(|s| (200..=599).contains(&s.as_u16()))
            .ok_or_else(|| format!("invalid response status {status} (must be 200..=599)"))?;
        let lines: &[GwHeader] = if count == 0 || headers.is_null() {
            &[]
        } else {
            // SAFETY: the plugin passes `count` headers at `headers`.
            unsafe { std::slice::from_raw_parts(headers, count) }
        };
        let mut map = HeaderMap::try_with_capacity(lines.len()).map_err(too_many)?;
        for line in lines {
            take_text(&mut c.head, line.name, line.value)?;
            let (n, v) = header_pair(line.name, line.value)?;
            map.try_append(n, v).map_err(too_many)?;
        }
        // SAFETY: the plugin's buffer, alive during the callback.
        let body = unsafe { bytes(body) };
        within(
            body,
            MAX_BUFFERED_BODY,
            "respond",
            "a middleware's own answer",
        )?;
        c.response = Some(Box::new(MwResponse {
            status,
            headers: map,
            body: Bytes::copy_from_slice(body),
        }));
        Ok(())
    })
}

unsafe extern "C" fn set_error(req: *mut GwRequest, message: GwStr) {
    guard((), || {
        // SAFETY: the plugin's handle and buffer.
        let (ctx, msg) = unsafe { (ctx_mut(req), bytes(message)) };
        // Cut before it is copied (a Go handler's `panic(big)` arrives
        // here): the message goes into a log line. A few bytes past the
        // bound are kept, so that `clip` sees the cut and marks it.
        let head = &msg[..msg.len().min(crate::error::MAX_ERROR_TEXT + 4)];
        ctx.error = Some(crate::error::clip(
            String::from_utf8_lossy(head).into_owned(),
        ));
    })
}

unsafe extern "C" fn api_id(req: *const GwRequest) -> GwStr {
    guard(GwStr::EMPTY, || {
        s(unsafe { ctx(req) }.api.api_id.as_bytes())
    })
}

unsafe extern "C" fn config_data(req: *const GwRequest) -> GwStr {
    guard(GwStr::EMPTY, || {
        s(unsafe { ctx(req) }.api.config_json.as_bytes())
    })
}

unsafe extern "C" fn log(req: *const GwRequest, level: u32, message: GwStr) {
    guard((), || {
        // SAFETY: the plugin's handle and buffer.
        let (ctx, msg) = unsafe { (ctx(req), bytes(message)) };
        // One bounded line, as every middleware's (`error::log_text`).
        let msg = crate::error::log_bytes(msg, true);
        let (api_id, name) = (ctx.api.api_id.as_str(), ctx.name);
        // One macro call per level: tracing's level is part of the callsite.
        match level {
            GW_LOG_ERROR => tracing::error!(api_id, middleware = name, "{msg}"),
            GW_LOG_WARN => tracing::warn!(api_id, middleware = name, "{msg}"),
            GW_LOG_INFO => tracing::info!(api_id, middleware = name, "{msg}"),
            _ => tracing::debug!(api_id, middleware = name, "{msg}"),
        }
    })
}

unsafe extern "C" fn call_budget_us(req: *const GwRequest) -> u64 {
    guard(0, || unsafe { ctx(req) }.api.budget_us)
}

unsafe extern "C" fn set_method(req: *mut GwRequest, method: GwStr) -> i32 {
    edit(req, |c| {
        // SAFETY: the plugin's buffer, alive during the callback.
        let raw = unsafe { bytes(method) };
        // `Method::from_bytes` takes any HTTP token (RFC 9110's tchar),
        // case kept, as Go's client does (its validMethod); an empty
        // method or one with a space or a control byte is refused.
        let m = Method::from_bytes(raw).map_err(|_| {
            format!(
                "invalid method {:?}: a method must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)",
                String::from_utf8_lossy(raw)
            )
        })?;
        *c.req.method_mut() = m;
        Ok(())
    })
}

unsafe extern "C" fn add_client_header(req: *mut GwRequest, name: GwStr, value: GwStr) -> i32 {
    edit(req, |c| {
        take_text(&mut c.head, name, value)?;
        let (n, v) = header_pair(name, value)?;
        let added = c.req.client_headers_mut();
        if added.len() >= MAX_CLIENT_HEADER_LINES {
            // The request fails (500): its answer must not carry the
            // lines that made it fail.
            added.clear();
            return Err(too_many_client_headers());
        }
        added.try_append(n, v).map_err(too_many)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call's header lines total at most `MAX_HEAD_TEXT` bytes, taken
    /// before anything is copied; an overflowing length is past it.
    #[test]
    fn a_call_takes_at_most_a_mebibyte_of_header_text() {
        let value = vec![b'v'; 64 * 1024];
        let mut head = HeadBudget::new();
        let mut kept = 0;
        while take_text(&mut head, s(b"x-big"), s(&value)).is_ok() {
            kept += 1;
            assert!(kept < 100, "never refused");
        }
        assert_eq!(kept, 15);
        // One byte past a full call.
        let mut full = HeadBudget::new();
        take_text(&mut full, s(&vec![b'v'; MAX_HEAD_TEXT]), s(b"")).unwrap();
        let e = take_text(&mut full, s(b""), s(b"v")).unwrap_err();
        assert!(e.contains("more than 1048576 bytes (1 MiB)"), "{e}");
        let huge = GwStr {
            ptr: value.as_ptr(),
            len: usize::MAX,
        };
        assert!(take_text(&mut HeadBudget::new(), s(b"x"), huge).is_err());
    }
}
