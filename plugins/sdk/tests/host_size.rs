//! The ABI's version rule, from the plugin's side: a plugin built with this
//! SDK runs on a host whose table ends before the ABI 1.1 callbacks (an
//! older gateway), getting `None` from them instead of reading past the
//! table; and it refuses a table shorter than version 1's base. The same
//! for the 1.2 (response phase) callbacks on a 1.1 table.

use std::sync::atomic::{AtomicUsize, Ordering};

use plugin_sdk::abi::{
    GwHeader, GwHost, GwRequest, GwStr, ABI_VERSION, GW_CONTINUE, GW_ERROR, GW_HOST_BASE_SIZE,
    GW_NOT_FOUND, GW_OK,
};
use plugin_sdk::{LogLevel, PluginError, Request};

/// Calls of the 1.1 callbacks: must stay 0 on a short table.
static NEW_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn s(_: *const GwRequest) -> GwStr {
    GwStr::new(b"x")
}
unsafe extern "C" fn q(_: *const GwRequest, _: *mut GwStr) -> i32 {
    GW_NOT_FOUND
}
unsafe extern "C" fn hc(_: *const GwRequest, _: GwStr) -> usize {
    0
}
unsafe extern "C" fn hg(_: *const GwRequest, _: GwStr, _: usize, _: *mut GwStr) -> i32 {
    GW_NOT_FOUND
}
unsafe extern "C" fn hl(_: *const GwRequest) -> usize {
    0
}
unsafe extern "C" fn hline(_: *const GwRequest, _: usize, _: *mut GwHeader) -> i32 {
    GW_NOT_FOUND
}
unsafe extern "C" fn set2(_: *mut GwRequest, _: GwStr, _: GwStr) -> i32 {
    GW_OK
}
unsafe extern "C" fn set1(_: *mut GwRequest, _: GwStr) -> i32 {
    GW_OK
}
unsafe extern "C" fn setq(_: *mut GwRequest, _: *const GwStr) -> i32 {
    GW_OK
}
unsafe extern "C" fn respond(
    _: *mut GwRequest,
    _: u16,
    _: *const GwHeader,
    _: usize,
    _: GwStr,
) -> i32 {
    GW_OK
}
unsafe extern "C" fn set_error(_: *mut GwRequest, _: GwStr) {}
unsafe extern "C" fn new_str(_: *const GwRequest) -> GwStr {
    NEW_CALLS.fetch_add(1, Ordering::SeqCst);
    GwStr::new(b"new")
}
unsafe extern "C" fn new_log(_: *const GwRequest, _: u32, _: GwStr) {
    NEW_CALLS.fetch_add(1, Ordering::SeqCst);
}
unsafe extern "C" fn new_budget(_: *const GwRequest) -> u64 {
    NEW_CALLS.fetch_add(1, Ordering::SeqCst);
    7
}

/// Calls of the 1.2 callbacks: must stay 0 on a 1.1 table.
static RESP_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn r_status(_: *const GwRequest) -> u16 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    200
}
unsafe extern "C" fn r_set_status(_: *mut GwRequest, _: u16) -> i32 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_OK
}
unsafe extern "C" fn r_hc(_: *const GwRequest, _: GwStr) -> usize {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    0
}
unsafe extern "C" fn r_hg(_: *const GwRequest, _: GwStr, _: usize, _: *mut GwStr) -> i32 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_NOT_FOUND
}
unsafe extern "C" fn r_hl(_: *const GwRequest) -> usize {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    0
}
unsafe extern "C" fn r_hline(_: *const GwRequest, _: usize, _: *mut GwHeader) -> i32 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_NOT_FOUND
}
unsafe extern "C" fn r_set2(_: *mut GwRequest, _: GwStr, _: GwStr) -> i32 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_OK
}
unsafe extern "C" fn r_set1(_: *mut GwRequest, _: GwStr) -> i32 {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_OK
}
unsafe extern "C" fn r_body(_: *const GwRequest) -> GwStr {
    RESP_CALLS.fetch_add(1, Ordering::SeqCst);
    GwStr::new(b"body")
}

fn table(size: usize) -> GwHost {
    GwHost {
        abi_version: ABI_VERSION,
        size: size as u32,
        method: s,
        path: s,
        query: q,
        header_count: hc,
        header_get: hg,
        header_lines: hl,
        header_line: hline,
        body: s,
        set_header: set2,
        append_header: set2,
        delete_header: set1,
        set_path: set1,
        set_query: setq,
        set_body: set1,
        respond,
        set_error,
        api_id: new_str,
        config_data: new_str,
        log: new_log,
        call_budget_us: new_budget,
        response_status: r_status,
        set_response_status: r_set_status,
        response_header_count: r_hc,
        response_header_get: r_hg,
        response_header_lines: r_hl,
        response_header_line: r_hline,
        set_response_header: r_set2,
        append_response_header: r_set2,
        delete_response_header: r_set1,
        response_body: r_body,
        set_response_body: r_set1,
        set_method: n_set1,
        add_client_header: n_set2,
    }
}

/// Calls of the ABI 1.3 stubs below.
static NEW13_CALLS: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn n_set1(_: *mut GwRequest, _: GwStr) -> i32 {
    NEW13_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_OK
}
unsafe extern "C" fn n_set2(_: *mut GwRequest, _: GwStr, _: GwStr) -> i32 {
    NEW13_CALLS.fetch_add(1, Ordering::SeqCst);
    GW_OK
}

/// A plugin built against ABI 1.3 on a 1.2 gateway: `set_method` and
/// `add_client_header` are errors saying why, and the table past its size
/// is never read; on a 1.3 table they are called.
#[test]
fn a_1_2_host_has_no_method_or_client_header_edits_and_none_is_called() {
    NEW13_CALLS.store(0, Ordering::SeqCst);
    let v1_2 = std::mem::offset_of!(GwHost, set_method);
    let host = table(v1_2);
    let mut handle = 0u8;
    // SAFETY: as in `read_new`.
    let mut req = unsafe { Request::from_raw(&host, &mut handle as *mut u8 as *mut GwRequest) };
    let e = req.set_method("POST").unwrap_err();
    assert!(e.message().contains("older than ABI 1.3"), "{e}");
    assert!(req.add_client_header("x", "y").is_err());
    assert_eq!(NEW13_CALLS.load(Ordering::SeqCst), 0);
    let full = table(std::mem::size_of::<GwHost>());
    // SAFETY: as above.
    let mut req = unsafe { Request::from_raw(&full, &mut handle as *mut u8 as *mut GwRequest) };
    req.set_method("POST").unwrap();
    req.add_client_header("x", "y").unwrap();
    assert_eq!(NEW13_CALLS.load(Ordering::SeqCst), 2);
}

#[test]
fn a_1_1_host_has_no_response_phase_and_none_of_it_is_called() {
    RESP_CALLS.store(0, Ordering::SeqCst);
    let v1_1 = std::mem::offset_of!(GwHost, response_status);
    let host = table(v1_1);
    let mut handle = 0u8;
    // SAFETY: as in `read_new`.
    let mut req = unsafe { Request::from_raw(&host, &mut handle as *mut u8 as *mut GwRequest) };
    assert_eq!(req.response_status(), None);
    assert_eq!(req.response_body(), b"");
    assert_eq!(req.response_headers().count(), 0);
    assert!(req.response_header("x").is_none());
    let e = req.set_response_body("x").unwrap_err();
    assert!(e.message().contains("ABI older than 1.2"), "{e}");
    assert!(req.set_response_status(201).is_err());
    assert_eq!(RESP_CALLS.load(Ordering::SeqCst), 0);
    let full = table(std::mem::size_of::<GwHost>());
    // SAFETY: as above.
    let mut req = unsafe { Request::from_raw(&full, &mut handle as *mut u8 as *mut GwRequest) };
    assert_eq!(req.response_status(), Some(200));
    assert_eq!(req.response_body(), b"body");
    req.set_response_header("x", "y").unwrap();
    assert_eq!(RESP_CALLS.load(Ordering::SeqCst), 3);
}

/// What the 1.1 readers return on a table of `size` bytes.
fn read_new(size: usize) -> (Option<String>, Option<String>, Option<u128>) {
    let host = table(size);
    let mut handle = 0u8;
    // SAFETY: the table is complete in memory (only `size` says otherwise),
    // and the stub callbacks never dereference the handle.
    let req = unsafe { Request::from_raw(&host, &mut handle as *mut u8 as *mut GwRequest) };
    req.log(LogLevel::Info, "hello");
    (
        req.api_id().map(str::to_string),
        req.config_data().map(str::to_string),
        req.call_budget().map(|d| d.as_micros()),
    )
}

#[test]
fn an_older_host_has_no_1_1_callbacks_and_none_are_called() {
    NEW_CALLS.store(0, Ordering::SeqCst);
    assert_eq!(read_new(GW_HOST_BASE_SIZE), (None, None, None));
    assert_eq!(NEW_CALLS.load(Ordering::SeqCst), 0);
    let full = std::mem::size_of::<GwHost>();
    let got = read_new(full);
    assert_eq!(got, (Some("new".into()), Some("new".into()), Some(7)));
    assert_eq!(NEW_CALLS.load(Ordering::SeqCst), 4);
}

fn ok(_: &mut Request<'_>) -> Result<(), PluginError> {
    Ok(())
}

#[test]
fn the_export_shim_accepts_an_older_host_and_refuses_a_truncated_one() {
    let mut handle = 0u8;
    let req = &mut handle as *mut u8 as *mut GwRequest;
    let older = table(GW_HOST_BASE_SIZE);
    // SAFETY: as above.
    assert_eq!(
        unsafe { plugin_sdk::__private::call(&older, req, ok) },
        GW_CONTINUE
    );
    let truncated = table(GW_HOST_BASE_SIZE - 8);
    assert_eq!(
        unsafe { plugin_sdk::__private::call(&truncated, req, ok) },
        GW_ERROR
    );
    let mut other = table(std::mem::size_of::<GwHost>());
    other.abi_version = ABI_VERSION + 1;
    assert_eq!(
        unsafe { plugin_sdk::__private::call(&other, req, ok) },
        GW_ERROR
    );
}
