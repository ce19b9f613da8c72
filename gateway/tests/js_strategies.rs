//! The JS behaviour scenarios run once per (engine, strategy), through the
//! real gateway on 127.0.0.1:0: every strategy must give the same answers,
//! except where the strategy *is* the difference (state across requests),
//! which each strategy asserts for itself.
//!
//! Here the engine and strategy come from the gateway's flags
//! (`--jsvm-engine`, `--jsvm-strategy`), the definitions naming neither. To
//! add an engine or a strategy, add it to `common::JS_COMBOS`; each scenario is a
//! plain function of the combination.

mod common;

use std::path::Path;

use gateway::config::JsEngine;
use gateway::js::Strategy;
use gateway::server::GatewayConfig;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Writes an API whose definition names no strategy: the gateway's
/// `--jsvm-strategy` decides.
fn api(dir: &Path, id: &str, target: &str, name: &str, script: String) {
    let mw = json!({ "driver": "otto", "pre": [{ "name": name, "path": script }] });
    common::write_api(
        dir,
        id,
        &common::api_json(id, &format!("/{id}/"), target, true, mw),
    );
}

/// Runs `scenario` against a one-worker gateway for each combination.
fn each(scenario: impl Fn(JsEngine, Strategy, &common::TestGateway)) {
    for &(engine, strategy) in common::JS_COMBOS {
        let dir = tempfile::tempdir().unwrap();
        let up = format!("http://{}", common::mock());
        let seed = format!("{}/../js/jsvm_hello.js", env!("CARGO_MANIFEST_DIR"));
        api(dir.path(), "jsvm", &up, "jsvmHelloPreHook", seed);
        api(dir.path(), "faults", &up, "faultsMw", fixture("faults.js"));
        api(
            dir.path(),
            "ro",
            &up,
            "overridesMw",
            fixture("overrides.js"),
        );
        let gw = common::start_gateway_with(GatewayConfig {
            apis_dir: dir.path().to_path_buf(),
            threads: 1,
            jsvm_strategy: strategy,
            jsvm_engine: engine,
            ..GatewayConfig::default()
        });
        assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
        scenario(engine, strategy, &gw);
        gw.stop();
    }
}

#[test]
fn the_seed_header_reaches_the_upstream() {
    each(|engine, strategy, gw| {
        for _ in 0..3 {
            let echo = common::get(gw.addr, "/jsvm/hello/").json();
            assert_eq!(
                echo["headers"]["X-Custom-Jsvm"], "hello-from-jsvm",
                "{engine:?} {strategy:?}"
            );
        }
    });
}

#[test]
fn a_throw_fails_its_request_and_the_next_one_works() {
    each(|engine, strategy, gw| {
        for _ in 0..20 {
            let got = common::send(gw.addr, "GET", "/faults/", &[("x-fault", "throw")], b"");
            assert_eq!(got.status, 500, "{engine:?} {strategy:?}");
            assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
            let ok = common::get(gw.addr, "/faults/");
            assert_eq!(ok.status, 200, "{engine:?} {strategy:?}: {}", ok.text());
        }
    });
}

#[test]
fn return_overrides_answer_without_proxying() {
    each(|engine, strategy, gw| {
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "error")], b"");
        assert_eq!(got.status, 403, "{engine:?} {strategy:?}");
        assert_eq!(got.json(), json!({ "error": "go away" }));
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "ok")], b"");
        assert_eq!(
            (got.status.as_u16(), got.text().as_str()),
            (200, "answered by js")
        );
    });
}

/// The one scenario where strategies differ: a global counting calls.
/// Persistent and tyk-json keep it (1, 2, 3 on one worker); fresh is Tyk's (each call
/// sees a context no earlier call touched: 1, 1, 1, as Tyk's
/// `TestGoja_FreshRuntimePerRequest` expects).
#[test]
fn script_globals_follow_the_strategy() {
    each(|engine, strategy, gw| {
        let calls: Vec<Value> = (0..3)
            .map(|_| common::get(gw.addr, "/faults/").json()["headers"]["X-Calls"].clone())
            .collect();
        let want = match strategy {
            Strategy::Persistent | Strategy::TykJson => ["1", "2", "3"],
            Strategy::Fresh => ["1", "1", "1"],
        };
        assert_eq!(
            calls,
            want.map(Value::from).to_vec(),
            "{engine:?} {strategy:?}"
        );
    });
}

#[test]
fn a_definition_chooses_its_own_strategy_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    for (id, strategy) in [
        ("fresh", "fresh"),
        ("tj", "tyk-json"),
        ("bad", "per-request"),
    ] {
        let mw = json!({ "driver": "otto", "strategy": strategy,
                         "pre": [{ "name": "faultsMw", "path": fixture("faults.js") }] });
        common::write_api(
            dir.path(),
            id,
            &common::api_json(id, &format!("/{id}/"), &up, true, mw),
        );
    }
    let gw = common::start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("custom_middleware.strategy"),
        "{errors:?}"
    );
    assert!(errors[0].contains("per-request"), "{errors:?}");
    for i in 1..=3 {
        let echo = common::get(gw.addr, "/fresh/").json();
        assert_eq!(echo["headers"]["X-Calls"], "1");
        let echo = common::get(gw.addr, "/tj/").json();
        assert_eq!(echo["headers"]["X-Calls"], i.to_string());
    }
    gw.stop();
}

/// `fresh` puts back everything a call changed, whatever it changed: the
/// natives it deleted (with enough garbage that the collector runs, and
/// would finalize a native whose last reference went), the builtins it
/// replaced, the prototypes and globals it added to. And `Math.random`
/// still draws new numbers per call (QuickJS restores its context's state:
/// its generator must not be part of it).
#[test]
fn fresh_puts_back_whatever_a_call_changed() {
    const SCRIPT: &str = r#"var freshMw = new TykJS.TykMiddleware.NewMiddleware({});
freshMw.NewProcessRequest(function (request, session) {
    var seen = [typeof log, typeof b64enc, typeof Math.max, typeof Math.random,
                String([].leaked), String(globalThis.leaked)].join(",");
    delete globalThis.log;
    delete globalThis.b64enc;
    Math.max = null;
    Array.prototype.leaked = "yes";
    globalThis.leaked = "yes";
    var junk = [];
    for (var i = 0; i < 20000; i++) { var a = {}; a.self = a; junk.push(a); }
    junk = null;
    request.SetHeaders["X-Seen"] = seen;
    request.SetHeaders["X-Random"] = String(Math.random());
    delete Math.random;
    junk = [];
    for (var j = 0; j < 20000; j++) { var b = {}; b.self = b; junk.push(b); }
    return freshMw.ReturnData(request, {});
});
"#;
    for &(engine, strategy) in common::JS_COMBOS {
        if strategy != Strategy::Fresh {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fresh.js");
        std::fs::write(&script, SCRIPT).unwrap();
        let up = format!("http://{}", common::mock());
        api(
            dir.path(),
            "fresh",
            &up,
            "freshMw",
            script.display().to_string(),
        );
        let gw = common::start_gateway_with(GatewayConfig {
            apis_dir: dir.path().to_path_buf(),
            threads: 1,
            jsvm_strategy: strategy,
            jsvm_engine: engine,
            ..GatewayConfig::default()
        });
        assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
        let mut randoms = Vec::new();
        for i in 0..4 {
            let got = common::get(gw.addr, "/fresh/");
            assert_eq!(got.status, 200, "{engine:?} call {i}: {}", got.text());
            let echo = got.json();
            assert_eq!(
                echo["headers"]["X-Seen"],
                "function,function,function,function,undefined,undefined",
                "{engine:?} call {i}"
            );
            randoms.push(echo["headers"]["X-Random"].as_str().unwrap().to_string());
        }
        randoms.sort();
        randoms.dedup();
        assert_eq!(randoms.len(), 4, "{engine:?}: Math.random repeated itself");
        gw.stop();
    }
}
