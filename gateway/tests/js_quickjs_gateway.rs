//! QuickJS end to end: a real gateway on 127.0.0.1:0, the real mock upstream
//! or a recording upstream, real HTTP, real scripts. Each scenario takes the
//! engine and strategy names (ported from `js_gateway.rs`).

mod common;

use std::path::Path;
use std::time::Duration;

use gateway::config::JsEngine;
use gateway::server::GatewayConfig;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `(engine, strategy)`; an empty name leaves the field out.
type Mode = (&'static str, &'static str);

const MODES: [Mode; 2] = [("quickjs", "persistent"), ("quickjs", "fresh")];

fn js(mode: Mode, hook: &str, name: &str, path: String) -> Value {
    let mut mw = json!({ "driver": "otto", hook: [{ "name": name, "path": path }] });
    if !mode.0.is_empty() {
        mw["engine"] = json!(mode.0);
    }
    if !mode.1.is_empty() {
        mw["strategy"] = json!(mode.1);
    }
    mw
}

fn write(dir: &Path, id: &str, target: &str, mw: Value) {
    let mut v = common::api_json(id, &format!("/{id}/"), target, true, mw);
    v["config_data"] = json!({ "greeting": "hi" });
    common::write_api(dir, id, &v);
}

fn gateway_with(dir: &Path, timeout: Duration, engine: JsEngine) -> common::TestGateway {
    common::start_gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 2,
        jsvm_timeout: timeout,
        jsvm_engine: engine,
        jsvm_memory: 32 << 20,
        ..GatewayConfig::default()
    })
}

fn assert_internal_error(got: &common::Got) {
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
}

fn seed_route_shows_the_jsvm_header_in_the_echo(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    let repo_js = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
    write(
        dir.path(),
        "jsvm",
        &up,
        js(mode, "pre", "jsvmHelloPreHook", repo_js),
    );
    let gw = common::start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..4 {
        let echo = common::get(gw.addr, "/jsvm/hello/").json();
        assert_eq!(echo["headers"]["X-Custom-Jsvm"], "hello-from-jsvm");
        assert_eq!(echo["path"], "/hello/");
    }
    let s = gw.stats.summaries();
    let mine = s.iter().find(|c| c.api_id == "jsvm").expect("stats");
    assert_eq!(mine.middleware, "jsvmHelloPreHook");
    assert_eq!(mine.count, 4);
    gw.stop();
}

#[test]
fn the_seed_route_shows_the_jsvm_header_in_the_echo() {
    for mode in MODES {
        seed_route_shows_the_jsvm_header_in_the_echo(mode);
    }
}

fn every_request_field_and_rule_reaches_the_upstream(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let (addr, rec) = common::recorder();
    let up = format!("http://{addr}");
    write(
        dir.path(),
        "hdr",
        &up,
        js(mode, "pre", "headersMw", fixture("headers.js")),
    );
    write(
        dir.path(),
        "q",
        &up,
        js(mode, "post", "queryMw", fixture("query.js")),
    );
    write(
        dir.path(),
        "body",
        &up,
        js(mode, "pre", "bodyMw", fixture("body.js")),
    );
    let gw = common::start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let headers = [
        ("X-Api-Key", "k1"),
        ("x-multi", "one"),
        ("x-multi", "two"),
        ("x-replace", "old"),
        ("x-drop", "d"),
    ];
    let got = common::send(gw.addr, "GET", "/hdr/p?q=1", &headers, b"");
    assert_eq!(got.status, 200);
    let seen = rec.last();
    let h = |n: &str| seen.headers.get(n).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(h("x-seen-key").as_deref(), Some("k1"));
    assert_eq!(h("x-seen-multi").as_deref(), Some(r#"["one","two"]"#));
    assert_eq!(h("x-seen-method").as_deref(), Some("GET /hdr/p?q=1 http"));
    assert_eq!(h("x-seen-spec").as_deref(), Some("hdr/default/hi"));
    assert_eq!(h("x-replace").as_deref(), Some("new"));
    assert_eq!(h("x-drop"), None);
    assert_eq!(seen.uri, "/p?q=1");

    common::send(gw.addr, "GET", "/q/a?z=1&drop=x&multi=a", &[], b"");
    let seen = rec.last();
    assert_eq!(seen.uri, "/a?added=x+y&multi=a&multi=b&multi=c&z=1");
    assert_eq!(
        seen.headers["x-uris"],
        // post sees the path the client sent (Tyk strips after post).
        "/q/a?z=1&drop=x&multi=a /q/a?z=1&drop=x&multi=a"
    );

    let ct = [("content-type", "text/plain")];
    let got = common::send(gw.addr, "POST", "/body/", &ct, b"hello");
    assert_eq!(got.status, 200);
    let seen = rec.last();
    assert_eq!(&seen.body[..], b"rewritten:hello");
    assert_eq!(seen.headers.get("x-b64").unwrap(), "aGVsbG8=");
    gw.stop();
}

#[test]
fn every_request_field_and_rule_reaches_the_upstream_both() {
    for mode in MODES {
        every_request_field_and_rule_reaches_the_upstream(mode);
    }
}

#[test]
fn return_overrides_answer_the_client_and_nothing_is_proxied() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let (addr, rec) = common::recorder();
        let mw = js(mode, "pre", "overridesMw", fixture("overrides.js"));
        write(dir.path(), "ro", &format!("http://{addr}"), mw);
        let gw = common::start_gateway(dir.path());
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "error")], b"");
        assert_eq!(got.status, 403);
        assert_eq!(got.json(), json!({ "error": "go away" }));
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "ok")], b"");
        assert_eq!(got.text(), "answered by js");
        assert_eq!(rec.count(), 0);
        common::send(gw.addr, "GET", "/ro/", &[], b"");
        assert_eq!(rec.count(), 1);
        gw.stop();
    }
}

fn faults_and_limits_answer_500_and_the_api_keeps_serving(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "faults",
        &up,
        js(mode, "pre", "faultsMw", fixture("faults.js")),
    );
    write(
        dir.path(),
        "limits",
        &up,
        js(mode, "pre", "limitsMw", fixture("limits.js")),
    );
    write(
        dir.path(),
        "other",
        &up,
        js(mode, "pre", "mw", fixture("clash_a.js")),
    );
    let gw = gateway_with(dir.path(), Duration::from_millis(500), JsEngine::Boa);
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let cases = [
        ("faults", "throw"),
        ("faults", "shape"),
        ("faults", "crlf"),
        ("faults", "loop"),
        ("faults", "callbackloop"),
        ("limits", "regex"),
        ("limits", "foreach"),
        ("limits", "alloc"),
        ("limits", "onestep"),
        ("limits", "deepjson"),
        ("limits", "recurse"),
    ];
    for (api, fault) in cases {
        let path = format!("/{api}/");
        let got = common::send(gw.addr, "GET", &path, &[("x-fault", fault)], b"");
        assert_internal_error(&got);
        let ok = common::get(gw.addr, &path);
        assert_eq!(ok.status, 200, "{fault}: {}", ok.text());
        let other = common::get(gw.addr, "/other/").json();
        assert_eq!(other["headers"]["X-Owner"], "a", "{fault}");
    }
    gw.stop();
}

#[test]
fn faults_and_limits_answer_500_and_the_api_keeps_serving_both() {
    for mode in MODES {
        faults_and_limits_answer_500_and_the_api_keeps_serving(mode);
    }
}

#[test]
fn the_engine_comes_from_the_definition_or_the_gateway_default() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    // Only QuickJS has a memory limit: a one-step 800 MB allocation is a 500
    // there, so it tells which engine ran the route. Boa routes keep to
    // harmless faults.
    write(
        dir.path(),
        "named",
        &up,
        js(("quickjs", ""), "pre", "limitsMw", fixture("limits.js")),
    );
    write(
        dir.path(),
        "default",
        &up,
        js(("", ""), "pre", "limitsMw", fixture("limits.js")),
    );
    write(
        dir.path(),
        "count",
        &up,
        js(("", "fresh"), "pre", "counterMw", fixture("counter.js")),
    );
    let gw = gateway_with(dir.path(), Duration::from_secs(5), JsEngine::QuickJs);
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for path in ["/named/", "/default/"] {
        let got = common::send(gw.addr, "GET", path, &[("x-fault", "onestep")], b"");
        assert_internal_error(&got);
    }
    // With --jsvm-engine quickjs, a definition naming no engine runs on
    // QuickJS, and its strategy applies: fresh state every request.
    for _ in 0..3 {
        let echo = common::get(gw.addr, "/count/").json();
        assert_eq!(echo["headers"]["X-Count"], "0");
    }
    gw.stop();
}

#[test]
fn a_bad_engine_or_strategy_fails_that_api_only() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "v8",
        &up,
        js(("v8", ""), "pre", "mw", fixture("clash_a.js")),
    );
    write(
        dir.path(),
        "odd",
        &up,
        js(("quickjs", "sometimes"), "pre", "mw", fixture("clash_a.js")),
    );
    write(
        dir.path(),
        "bad",
        &up,
        js(("quickjs", ""), "pre", "broken", fixture("syntax_error.js")),
    );
    write(
        dir.path(),
        "good",
        &up,
        js(("quickjs", ""), "pre", "mw", fixture("clash_a.js")),
    );
    let gw = common::start_gateway(dir.path());
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let has = |file: &str, what: &str| errors.iter().any(|e| e.contains(file) && e.contains(what));
    assert!(has("v8.json", "custom_middleware.engine"), "{errors:?}");
    assert!(has("odd.json", "custom_middleware.strategy"), "{errors:?}");
    assert!(has("bad.json", "line 4"), "{errors:?}");
    assert_eq!(common::get(gw.addr, "/good/").status, 200);
    gw.stop();
}
