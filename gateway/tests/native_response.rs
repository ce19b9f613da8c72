//! Native response entries (ABI 1.2) through the real gateway: a plugin
//! reads and edits the upstream's answer through the `response_*`
//! callbacks; request edits in that phase and response edits outside it
//! fail the request; a library built before 1.2 cannot be a response entry.

mod common;

use common::native::{native_api, plugins};
use common::*;
use serde_json::json;

#[test]
fn a_native_response_entry_edits_status_headers_and_body() {
    let p = plugins();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let lib = p.test.to_str().unwrap();
    let mut def = native_api("nresp", "/nresp/", &up.to_string(), &[], &[]);
    def["custom_middleware"]["response"] = json!([{"name": "StampResponse", "path": lib}]);
    write_api(dir.path(), "nresp", &def);
    let mut late = native_api("late", "/late/", &up.to_string(), &[], &[]);
    late["custom_middleware"]["response"] = json!([{"name": "EditRequestLate", "path": lib}]);
    write_api(dir.path(), "late", &late);
    // A response edit in the request phase is refused too.
    let early = native_api(
        "early",
        "/early/",
        &up.to_string(),
        &[(&p.test, "StampResponse")],
        &[],
    );
    write_api(dir.path(), "early", &early);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let r = get(gw.addr, "/nresp/a");
    assert_eq!(
        (r.status.as_u16(), r.text().as_str()),
        (200, "native saw: recorded")
    );
    assert_eq!(
        r.headers["x-native-response"],
        "status=200 upstream=recorder path=/nresp/a lines>0=true"
    );
    assert_eq!(r.headers["x-native-append"], "one");
    assert!(r.headers.get("x-upstream").is_none());
    assert_eq!(r.headers["content-length"], "20");
    let r = send(gw.addr, "GET", "/nresp/a", &[("x-want-status", "202")], b"");
    assert_eq!(r.status, 202);

    let late = get(gw.addr, "/late/");
    assert_eq!(late.status, 500);
    assert_eq!(late.text(), "{\n    \"error\": \"Middleware error\"\n}");
    let early = get(gw.addr, "/early/");
    assert_eq!(early.status, 500, "{}", early.text());
    // nresp twice and late went upstream; early failed before it.
    assert_eq!(rec.count(), 3);
    gw.stop();
}

#[test]
fn a_library_built_before_abi_1_2_cannot_be_a_response_entry() {
    let p = plugins();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let mut def = native_api("old", "/old/", &up.to_string(), &[], &[]);
    def["custom_middleware"]["response"] =
        json!([{"name": "OldHook", "path": p.pre_1_2.to_str().unwrap()}]);
    write_api(dir.path(), "old", &def);
    // The same library still serves the request phase.
    let pre = native_api(
        "oldpre",
        "/oldpre/",
        &up.to_string(),
        &[(&p.pre_1_2, "OldHook")],
        &[],
    );
    write_api(dir.path(), "oldpre", &pre);
    let gw = start_gateway(dir.path());
    let e = gw
        .load_errors
        .iter()
        .find(|e| e.file.ends_with("old.json"))
        .unwrap_or_else(|| panic!("no load error: {:?}", gw.load_errors));
    assert_eq!(e.field, "custom_middleware.response[0].path", "{e}");
    assert!(e.message.contains("no response phase"), "{e}");
    assert_eq!(get(gw.addr, "/old/").status, 500);
    assert_eq!(get(gw.addr, "/oldpre/").status, 200);
    assert_eq!(rec.count(), 1);
    gw.stop();
}

/// A response hook built against ABI 1.2 (minor 2) on a gateway that
/// speaks 1.3: the gateway compared the library's minor with its own, and
/// once that was 3 it refused every 1.2 response hook at load. The
/// response phase came with 1.2, and that is what is asked of it now.
#[test]
fn a_response_entry_built_against_abi_1_2_still_serves() {
    let p = plugins();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let mut def = native_api("r12", "/r12/", &up.to_string(), &[], &[]);
    def["custom_middleware"]["response"] =
        json!([{"name": "Stamp12", "path": p.abi_1_2.to_str().unwrap()}]);
    write_api(dir.path(), "r12", &def);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let r = get(gw.addr, "/r12/");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.headers["x-abi-1-2"], "stamped");
    assert_eq!(rec.count(), 1);
    gw.stop();
}

#[test]
fn wasm_response_entries_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let def = api_json(
        "wresp",
        "/wresp/",
        &format!("http://{up}"),
        true,
        json!({"driver": "wasm", "response": [{"name": "x", "path": "x.wasm"}]}),
    );
    write_api(dir.path(), "wresp", &def);
    let gw = start_gateway(dir.path());
    let e = gw
        .load_errors
        .iter()
        .find(|e| e.file.ends_with("wresp.json"))
        .unwrap_or_else(|| panic!("no load error: {:?}", gw.load_errors));
    assert_eq!(e.field, "custom_middleware.response", "{e}");
    assert_eq!(get(gw.addr, "/wresp/").status, 500);
    assert_eq!(rec.count(), 0);
    gw.stop();
}
