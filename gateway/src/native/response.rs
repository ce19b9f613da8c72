//! The response phase of the C ABI (1.2): the `response_*` callbacks, and
//! a response entry as a [`ResponseMiddleware`].
//!
//! A response entry is called with the same table and a handle whose
//! context carries the upstream's answer ([`Ctx::resp`]); the request it
//! reads is the one that went upstream, and editing it is refused
//! (`host.rs`). In the request phase these callbacks find nothing and
//! refuse every edit.

use std::future::ready;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::StatusCode;
use plugin_sdk::abi::{GwHeader, GwRequest, GwStr, GW_CONTINUE, GW_FOUND, GW_NOT_FOUND};

use super::host::{any_edit, bytes, ctx, guard, header_pair, lookup, s, within, Ctx, HOST};
use super::Entry;
use crate::intern::HeaderCache;
use crate::middleware::{
    HeadBudget, MwError, MwFutureOf, MwRequest, MwResponse, ReqMut, ResponseMiddleware,
};
use crate::response::MAX_BUFFERED_RESPONSE;

/// The answer of a live response call, if this is one.
///
/// # Safety
/// `req` must be the handle of a live call.
unsafe fn answer<'a>(req: *const GwRequest) -> Option<&'a MwResponse> {
    // SAFETY: per the function's contract.
    unsafe { ctx(req) }.resp.as_deref()
}

/// An edit of the response: refused outside the response phase.
fn edit(req: *mut GwRequest, f: impl FnOnce(&mut MwResponse) -> Result<(), String>) -> i32 {
    edit_counted(req, |resp, _| f(resp))
}

/// [`edit`], `f` also given what is left of the call's header text
/// ([`super::host::take_text`]).
fn edit_counted(
    req: *mut GwRequest,
    f: impl FnOnce(&mut MwResponse, &mut HeadBudget) -> Result<(), String>,
) -> i32 {
    any_edit(req, |c: &mut Ctx<'_, '_>| match c.resp.as_deref_mut() {
        Some(resp) => f(resp, &mut c.head),
        None => Err("there is no response to edit yet (only response entries can)".to_string()),
    })
}

pub(super) unsafe extern "C" fn response_status(req: *const GwRequest) -> u16 {
    // SAFETY (all callbacks): the plugin passes back the handle it was given.
    guard(0, || {
        unsafe { answer(req) }.map_or(0, |r| r.status.as_u16())
    })
}

pub(super) unsafe extern "C" fn set_response_status(req: *mut GwRequest, status: u16) -> i32 {
    edit(req, |r| {
        r.status = StatusCode::from_u16(status)
            .ok()
            .filter(|s| !s.is_informational())
            .ok_or_else(|| format!("invalid response status {status} (must be 200..=999)"))?;
        Ok(())
    })
}

pub(super) unsafe extern "C" fn response_header_count(req: *const GwRequest, name: GwStr) -> usize {
    guard(0, || match unsafe { answer(req) } {
        Some(r) => lookup(&r.headers, name).map_or(0, |all| all.iter().count()),
        None => 0,
    })
}

pub(super) unsafe extern "C" fn response_header_get(
    req: *const GwRequest,
    name: GwStr,
    index: usize,
    out: *mut GwStr,
) -> i32 {
    guard(GW_NOT_FOUND, || {
        let found = unsafe { answer(req) }
            .and_then(|r| lookup(&r.headers, name).and_then(|all| all.iter().nth(index)));
        match found {
            Some(v) if !out.is_null() => {
                // SAFETY: non-null place the plugin gave us.
                unsafe { out.write(s(v.as_bytes())) };
                GW_FOUND
            }
            _ => GW_NOT_FOUND,
        }
    })
}

pub(super) unsafe extern "C" fn response_header_lines(req: *const GwRequest) -> usize {
    guard(0, || unsafe { answer(req) }.map_or(0, |r| r.headers.len()))
}

pub(super) unsafe extern "C" fn response_header_line(
    req: *const GwRequest,
    index: usize,
    out: *mut GwHeader,
) -> i32 {
    guard(GW_NOT_FOUND, || {
        match unsafe { answer(req) }.and_then(|r| r.headers.iter().nth(index)) {
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

pub(super) unsafe extern "C" fn set_response_header(
    req: *mut GwRequest,
    name: GwStr,
    value: GwStr,
) -> i32 {
    edit_counted(req, |r, head| {
        super::host::take_text(head, name, value)?;
        let (n, v) = header_pair(name, value)?;
        r.headers.try_insert(n, v).map_err(super::host::too_many)?;
        Ok(())
    })
}

pub(super) unsafe extern "C" fn append_response_header(
    req: *mut GwRequest,
    name: GwStr,
    value: GwStr,
) -> i32 {
    edit_counted(req, |r, head| {
        super::host::take_text(head, name, value)?;
        let (n, v) = header_pair(name, value)?;
        r.headers.try_append(n, v).map_err(super::host::too_many)?;
        Ok(())
    })
}

pub(super) unsafe extern "C" fn delete_response_header(req: *mut GwRequest, name: GwStr) -> i32 {
    edit(req, |r| {
        let (n, _) = header_pair(name, GwStr::EMPTY)?;
        r.headers.remove(n);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn response_body(req: *const GwRequest) -> GwStr {
    guard(GwStr::EMPTY, || {
        unsafe { answer(req) }.map_or(GwStr::EMPTY, |r| s(&r.body))
    })
}

pub(super) unsafe extern "C" fn set_response_body(req: *mut GwRequest, body: GwStr) -> i32 {
    edit(req, |r| {
        // SAFETY: the plugin's buffer, alive during the callback.
        let raw = unsafe { bytes(body) };
        within(
            raw,
            MAX_BUFFERED_RESPONSE,
            "set_response_body",
            "a response body held for response middleware",
        )?;
        r.body = Bytes::copy_from_slice(raw);
        // The proxy frames the whole body from its length.
        r.headers.remove(CONTENT_LENGTH);
        r.headers.remove(TRANSFER_ENCODING);
        Ok(())
    })
}

/// A native response entry on one worker.
pub(super) struct NativeResponse(pub(super) Entry);

impl NativeResponse {
    fn call_sync(&self, req: &MwRequest, resp: &mut MwResponse) -> Result<(), MwError> {
        // The request is read-only here; the context wants it mutable
        // (its edit callbacks refuse in this phase), so it gets a copy of
        // the head (the body was never kept for this phase).
        let mut head = req.clone();
        let mut ctx = Ctx {
            req: ReqMut::Owned(&mut head),
            api: &self.0.api,
            name: &self.0.name,
            response: None,
            fault: None,
            error: None,
            resp: Some(resp),
            cache: &mut HeaderCache::default(),
            head: HeadBudget::new(),
        };
        let handle = &mut ctx as *mut Ctx<'_, '_> as *mut GwRequest;
        // SAFETY: as for the request phase (`NativeMiddleware::call_sync`).
        let rc = unsafe { (self.0.func)(&HOST, handle) };
        let name = &self.0.name;
        if let Some(fault) = ctx.fault {
            return Err(MwError::plugin_fault(format!(
                "native plugin {name}: {fault}"
            )));
        }
        if rc != GW_CONTINUE {
            let why = ctx.error.unwrap_or_else(|| "no message".to_string());
            return Err(MwError::threw(format!(
                "native plugin {name} returned error code {rc}: {why}"
            )));
        }
        Ok(())
    }
}

impl ResponseMiddleware for NativeResponse {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn call<'a>(&'a self, req: &'a MwRequest, resp: &'a mut MwResponse) -> MwFutureOf<'a, ()> {
        Box::pin(ready(self.call_sync(req, resp)))
    }
}
