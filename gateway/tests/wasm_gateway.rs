//! The wasm driver in the real gateway: real HTTP in, a real upstream out,
//! two worker threads each with its own instances.
#![cfg(feature = "wasm")]

mod common;
mod wasm_common;

use std::time::Duration;

use common::{get, mock, recorder, send, start_gateway, start_gateway_with, write_api};
use gateway::server::GatewayConfig;
use gateway::wasm::WasmLimits;
use serde_json::{json, Value};
use wasm_common::{fixture, sdk_module, wasm_api};

const TYK_500: &str = "Internal Server Error";

/// `apis/wasm-hello.json` as shipped, pointed at `upstream` and at the
/// module the build made (its path there is relative to the repo root).
fn shipped_wasm_hello(upstream: &str) -> Value {
    let text = include_str!("../../apis/wasm-hello.json");
    let mut def: Value = serde_json::from_str(text).unwrap();
    assert_eq!(def["custom_middleware"]["driver"], "wasm");
    assert_eq!(def["proxy"]["listen_path"], "/wasm/");
    def["proxy"]["target_url"] = json!(format!("http://{upstream}"));
    let module = sdk_module("add_header_wasm.wasm");
    def["custom_middleware"]["pre"][0]["path"] = json!(module.to_str().unwrap());
    def
}

#[test]
fn the_shipped_definition_adds_the_seeds_header_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let up = mock().to_string();
    write_api(dir.path(), "wasm-hello", &shipped_wasm_hello(&up));
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..4 {
        let got = get(gw.addr, "/wasm/hello/");
        assert_eq!(got.status, 200, "{}", got.text());
        let echo = got.json();
        assert_eq!(echo["path"], "/hello/");
        assert_eq!(echo["headers"]["X-Custom-Wasm"], "hello-from-wasm");
    }
    let s = gw.stats.summaries();
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!((s[0].api_id.as_str(), s[0].count), ("wasm-hello", 4));
    gw.stop();
}

#[test]
fn post_sees_the_clients_path_the_upstream_the_stripped_one_and_answers_skip_the_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let probe = sdk_module("probe.wasm");
    let mut def = wasm_api("probe", "/probe/", &up.to_string(), &[]);
    def["custom_middleware"]["post"] = json!([{"name": "Probe", "path": probe}]);
    write_api(dir.path(), "probe", &def);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let got = send(
        gw.addr,
        "GET",
        "/probe/a/b?c=d",
        &[("x-probe", "headers")],
        b"",
    );
    assert_eq!(got.status, 200, "{}", got.text());
    let seen = rec.last();
    // Post runs before the strip (as in Tyk, whose reverse proxy strips):
    // it sees the client's path; the upstream gets the stripped one.
    assert_eq!(seen.headers["x-seen-path"], "/probe/a/b?c=d");
    assert_eq!(seen.uri, "/a/b?c=d");

    let got = send(gw.addr, "POST", "/probe/", &[("x-probe", "body")], b"shout");
    assert_eq!(got.status, 200);
    assert_eq!(&rec.last().body[..], b"SHOUT");

    let before = rec.count();
    let got = send(gw.addr, "GET", "/probe/", &[("x-probe", "respond")], b"");
    assert_eq!(got.status, 403);
    assert_eq!(got.headers["x-why"], "probe");
    assert_eq!(got.text(), "denied by wasm");
    assert_eq!(rec.count(), before, "an answered request was proxied");
    gw.stop();
}

#[test]
fn faults_answer_500_and_every_worker_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let up = up.to_string();
    for (name, file) in [
        ("loop", "loop.wat"),
        ("grow", "grow.wat"),
        ("trap", "trap.wat"),
    ] {
        let module = fixture(file);
        let path = format!("/{name}/");
        write_api(
            dir.path(),
            name,
            &wasm_api(name, &path, &up, &[(&module, name)]),
        );
    }
    write_api(dir.path(), "wasm-hello", &shipped_wasm_hello(&up));
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        wasm: WasmLimits {
            timeout: Duration::from_millis(200),
            memory: 8 << 20,
        },
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    // Each round hits whichever worker the kernel picks; four rounds make it
    // very likely both workers met every fault.
    for round in 0..4 {
        for name in ["loop", "grow", "trap"] {
            let path = format!("/{name}/x");
            let got = send(gw.addr, "GET", &path, &[("x-fault", "1")], b"");
            assert_eq!(got.status, 500, "{name} round {round}");
            assert_eq!(got.json(), json!({"error": TYK_500}), "{name}");
            let got = get(gw.addr, &path);
            assert_eq!(got.status, 200, "after {name}: {}", got.text());
        }
        let got = get(gw.addr, "/wasm/hello/");
        assert_eq!(got.status, 200);
        assert_eq!(rec.last().headers["x-custom-wasm"], "hello-from-wasm");
    }
    assert_eq!(rec.count(), 4 * 4, "a failed request was proxied");
    gw.stop();
}

#[test]
fn a_broken_module_fails_its_api_at_load_naming_the_file_and_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let up = mock().to_string();
    let broken = fixture("missing_import.wat");
    write_api(
        dir.path(),
        "broken",
        &wasm_api("broken", "/broken/", &up, &[(&broken, "B")]),
    );
    write_api(dir.path(), "wasm-hello", &shipped_wasm_hello(&up));
    let gw = start_gateway(dir.path());
    assert_eq!(gw.load_errors.len(), 1, "{:?}", gw.load_errors);
    let e = gw.load_errors[0].to_string();
    assert!(e.contains("broken.json"), "{e}");
    assert!(e.contains("missing_import.wat"), "{e}");
    assert!(e.contains("custom_middleware.pre[0].path"), "{e}");
    let got = get(gw.addr, "/wasm/hello/");
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["headers"]["X-Custom-Wasm"], "hello-from-wasm");
    gw.stop();
}

/// Failures counted for `api_id`, as `(kind, count)`.
fn error_counts(gw: &common::TestGateway, api_id: &str) -> Vec<(String, u64)> {
    gw.stats
        .error_counts()
        .into_iter()
        .filter(|e| e.api_id == api_id)
        .map(|e| (e.kind, e.count))
        .collect()
}

/// A module that keeps adding headers reached `http::HeaderMap`'s maximum,
/// whose `append` panics: the worker's task died, the client got an empty
/// reply and nothing was counted. Past the host's bound the call traps now.
#[test]
fn a_module_flooding_headers_fails_its_request_as_a_plugin_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let module = fixture("header_flood.wat");
    write_api(
        dir.path(),
        "flood",
        &wasm_api("flood", "/flood/", &up.to_string(), &[(&module, "Flood")]),
    );
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for mode in ["add", "pairs", "local"] {
        let got = send(gw.addr, "GET", "/flood/x", &[("x-flood", mode)], b"");
        assert_eq!(got.status, 500, "{mode}: {}", got.text());
        assert_eq!(got.json(), json!({"error": TYK_500}), "{mode}");
        let got = get(gw.addr, "/flood/x");
        assert_eq!(got.status, 200, "after {mode}: {}", got.text());
    }
    assert_eq!(rec.count(), 3, "a flooded request was proxied");
    assert_eq!(
        error_counts(&gw, "flood"),
        [("plugin_fault".to_string(), 3)]
    );
    gw.stop();
}
