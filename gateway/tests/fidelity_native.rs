//! Fail closed with real plugin libraries: a native middleware that cannot
//! load (missing symbol, another ABI version, no version symbol) keeps its
//! API routed beside a `/` catch-all, answering Tyk's 500, never proxying.

mod common;

use common::native::{native_api, plugins, write_def};
use common::{api_json, recorder, send, start_gateway, write_api};
use serde_json::Value;

#[test]
fn a_native_plugin_that_cannot_load_fails_closed_beside_a_catch_all() {
    let p = plugins();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let target = up.to_string();
    write_api(
        dir.path(),
        "root",
        &api_json("root", "/", &format!("http://{up}"), false, Value::Null),
    );
    let cases = [
        ("nosymbol", &p.add_header, "addheader"),
        ("wrongabi", &p.wrong_abi, "AddHeader"),
        ("noversion", &p.no_version, "AddHeader"),
    ];
    for (name, lib, symbol) in cases {
        let def = native_api(name, &format!("/{name}/"), &target, &[(lib, symbol)], &[]);
        write_def(dir.path(), name, &def);
    }
    let gw = start_gateway(dir.path());
    assert_eq!(gw.load_errors.len(), cases.len(), "{:?}", gw.load_errors);
    // Many requests, both workers: every one fails closed.
    for _ in 0..10 {
        for (name, _, _) in cases {
            let got = send(gw.addr, "GET", &format!("/{name}/x"), &[], b"");
            assert_eq!(got.status, 500, "{name}: {}", got.text());
            assert_eq!(got.text(), "{\n    \"error\": \"Internal Server Error\"\n}");
            assert_eq!(got.headers["x-generator"], "tyk.io");
        }
    }
    assert_eq!(rec.count(), 0, "proxied: {:?}", rec.requests());
    assert_eq!(send(gw.addr, "GET", "/other", &[], b"").status, 200);
    assert_eq!(rec.count(), 1);
    gw.stop();
}
