//! A gateway built without the `wasm` feature (`cargo test -p gateway
//! --no-default-features --test wasm_feature_off`): a wasm API still
//! parses and stays routed, failing closed with a message that says why,
//! and the other APIs serve. Compiled to nothing in the default build.
#![cfg(not(feature = "wasm"))]

mod common;

use common::{api_json, get, mock, start_gateway, write_api};
use serde_json::json;

#[test]
fn wasm_apis_fail_closed_and_say_the_feature_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", mock());
    let mw = json!({"driver": "wasm", "pre": [{"name": "AddHeader", "path": "any.wasm"}]});
    write_api(dir.path(), "wasm", &api_json("w", "/w/", &up, true, mw));
    // A catch-all the wasm route must not fall through to.
    write_api(
        dir.path(),
        "all",
        &api_json("all", "/", &up, false, json!(null)),
    );
    let gw = start_gateway(dir.path());
    let err = gw
        .load_errors
        .iter()
        .find(|e| e.file.ends_with("wasm.json"));
    let err = err.unwrap_or_else(|| panic!("{:?}", gw.load_errors));
    assert_eq!(err.field, "custom_middleware.driver");
    assert!(
        err.message.contains("cargo feature `wasm`"),
        "{}",
        err.message
    );
    for _ in 0..3 {
        assert_eq!(get(gw.addr, "/w/hello").status, 500);
        assert_eq!(get(gw.addr, "/other").status, 200);
    }
    gw.stop();
}
