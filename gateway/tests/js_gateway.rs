//! The JS host end to end, on every engine with every strategy: a real
//! gateway on 127.0.0.1:0, the real mock upstream (the seed's echo server)
//! or a recording upstream, real HTTP, real scripts. Each shared scenario
//! is a function of the mode; then what only one engine has (boa's VM-thread
//! abandonment, QuickJS's memory limit), and how a definition picks its
//! engine and strategy.

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

const MODES: [Mode; 6] = [
    ("boa", "persistent"),
    ("boa", "tyk-json"),
    ("boa", "fresh"),
    ("quickjs", "persistent"),
    ("quickjs", "tyk-json"),
    ("quickjs", "fresh"),
];

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

/// The seed's default mode: boa, persistent (no fields written).
const DEFAULT: Mode = ("", "");

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
        assert_eq!(
            echo["headers"]["X-Custom-Jsvm"], "hello-from-jsvm",
            "{mode:?}"
        );
        assert_eq!(echo["path"], "/hello/");
    }
    // Call times land in the same per-API, per-hook histograms as native.
    let s = gw.stats.summaries();
    let mine = s.iter().find(|c| c.api_id == "jsvm").expect("stats");
    assert_eq!(
        (mine.hook.as_str(), mine.middleware.as_str()),
        ("pre", "jsvmHelloPreHook")
    );
    assert_eq!(mine.count, 4);
    gw.stop();
}

#[test]
fn the_seed_route_shows_the_jsvm_header_in_the_echo() {
    for mode in MODES {
        seed_route_shows_the_jsvm_header_in_the_echo(mode);
    }
}

/// `placement`: `custom_middleware.placement` ("" leaves it to the
/// gateway: QuickJS inline, where a bodiless request's chain runs in
/// place, until a call overruns its slice).
fn every_request_field_and_rule_reaches_the_upstream(mode: Mode, placement: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (addr, rec) = common::recorder();
    let up = format!("http://{addr}");
    let placed = |hook: &str, name: &str, file: &str| {
        let mut mw = js(mode, hook, name, fixture(file));
        if !placement.is_empty() {
            mw["placement"] = json!(placement);
        }
        mw
    };
    write(
        dir.path(),
        "hdr",
        &up,
        placed("pre", "headersMw", "headers.js"),
    );
    write(dir.path(), "q", &up, placed("post", "queryMw", "query.js"));
    write(dir.path(), "body", &up, placed("pre", "bodyMw", "body.js"));
    let gw = common::start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);

    let got = common::send(
        gw.addr,
        "GET",
        "/hdr/p?q=1",
        &[
            ("X-Api-Key", "k1"),
            ("x-multi", "one"),
            ("x-multi", "two"),
            ("x-replace", "old"),
            ("x-drop", "d"),
        ],
        b"",
    );
    assert_eq!(got.status, 200);
    let seen = rec.last();
    let h = |n: &str| seen.headers.get(n).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(h("x-seen-key").as_deref(), Some("k1"));
    assert_eq!(h("x-seen-multi").as_deref(), Some(r#"["one","two"]"#));
    // Pre runs before the listen path is stripped.
    assert_eq!(h("x-seen-method").as_deref(), Some("GET /hdr/p?q=1 http"));
    assert_eq!(h("x-seen-spec").as_deref(), Some("hdr/default/hi"));
    assert_eq!(h("x-replace").as_deref(), Some("new"));
    assert_eq!(h("x-drop"), None);
    assert_eq!(seen.uri, "/p?q=1");

    // Post runs before the strip, as in Tyk (the proxy strips); the query
    // edits reach the upstream.
    common::send(gw.addr, "GET", "/q/a?z=1&drop=x&multi=a", &[], b"");
    let seen = rec.last();
    assert_eq!(seen.uri, "/a?added=x+y&multi=a&multi=b&multi=c&z=1");
    // In post, URL is still the path the client sent, as is RequestURI.
    assert_eq!(
        seen.headers["x-uris"],
        "/q/a?z=1&drop=x&multi=a /q/a?z=1&drop=x&multi=a"
    );
    common::send(gw.addr, "GET", "/q/a?move=1", &[], b"");
    assert_eq!(
        rec.last().uri,
        "/moved/here?added=x+y&keep=1&multi=a&multi=b&multi=c"
    );

    let got = common::send(
        gw.addr,
        "POST",
        "/body/",
        &[("content-type", "text/plain")],
        b"hello",
    );
    assert_eq!(got.status, 200);
    let seen = rec.last();
    assert_eq!(&seen.body[..], b"rewritten:hello");
    assert_eq!(seen.headers.get("x-roundtrip").unwrap(), "true");
    assert_eq!(seen.headers.get("x-b64").unwrap(), "aGVsbG8=");
    gw.stop();
}

#[test]
fn every_request_field_and_rule_reaches_the_upstream_in_every_mode() {
    for mode in MODES {
        every_request_field_and_rule_reaches_the_upstream(mode, "");
    }
}

/// QuickJS by default runs a bodiless request's chain in place, on the
/// client's request as the server parsed it; on VM threads, or for a
/// request with a body, the chain runs on a middleware request. Each
/// placement gives the upstream the same request.
#[test]
fn every_request_field_and_rule_reaches_the_upstream_in_place_or_awaited() {
    for placement in ["inline", "threads", "adaptive"] {
        every_request_field_and_rule_reaches_the_upstream(("quickjs", "persistent"), placement);
        every_request_field_and_rule_reaches_the_upstream(("quickjs", "fresh"), placement);
    }
}

#[test]
fn return_overrides_answer_the_client_and_nothing_is_proxied() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let (addr, rec) = common::recorder();
        write(
            dir.path(),
            "ro",
            &format!("http://{addr}"),
            js(mode, "pre", "overridesMw", fixture("overrides.js")),
        );
        let gw = common::start_gateway(dir.path());
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "error")], b"");
        assert_eq!(got.status, 403);
        assert_eq!(got.headers.get("x-why").unwrap(), "policy");
        assert_eq!(got.json(), json!({ "error": "go away" }));
        let got = common::send(gw.addr, "GET", "/ro/", &[("x-mode", "ok")], b"");
        assert_eq!(
            (got.status.as_u16(), got.text().as_str()),
            (200, "answered by js")
        );
        assert_eq!(rec.count(), 0);
        common::send(gw.addr, "GET", "/ro/", &[], b"");
        assert_eq!(rec.count(), 1);
        gw.stop();
    }
}

fn faults_answer_500_and_the_api_keeps_serving(mode: Mode) {
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
    let mut cases = vec![
        ("faults", "throw"),
        ("faults", "nothing"),
        ("faults", "shape"),
        ("faults", "crlf"),
        ("faults", "recurse"),
        ("faults", "loop"),
        ("faults", "callbackloop"),
        ("faults", "alloc"),
    ];
    if mode.0 == "quickjs" {
        // What only QuickJS's limits stop inside one builtin step (boa
        // would allocate the 800 MB of `onestep`).
        cases.extend([
            ("limits", "regex"),
            ("limits", "foreach"),
            ("limits", "onestep"),
            ("limits", "deepjson"),
        ]);
    }
    for (api, fault) in cases {
        let path = format!("/{api}/");
        let got = common::send(gw.addr, "GET", &path, &[("x-fault", fault)], b"");
        assert_internal_error(&got);
        let ok = common::get(gw.addr, &path);
        assert_eq!(ok.status, 200, "{mode:?} {fault}: {}", ok.text());
        let other = common::get(gw.addr, "/other/").json();
        assert_eq!(other["headers"]["X-Owner"], "a", "{mode:?} {fault}");
    }
    gw.stop();
}

#[test]
fn faults_answer_500_and_the_api_keeps_serving_in_every_mode() {
    for mode in MODES {
        faults_answer_500_and_the_api_keeps_serving(mode);
    }
}

#[test]
fn a_runaway_script_does_not_stop_other_requests() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "faults",
        &up,
        js(DEFAULT, "pre", "faultsMw", fixture("faults.js")),
    );
    write(
        dir.path(),
        "other",
        &up,
        js(DEFAULT, "pre", "mw", fixture("clash_a.js")),
    );
    // Generous: the other requests must all finish while the runaway still
    // runs, also on a loaded machine with a debug build.
    let gw = gateway_with(dir.path(), Duration::from_secs(10), JsEngine::Boa);
    let addr = gw.addr;
    let (tx, rx) = std::sync::mpsc::channel();
    let slow_tx = tx.clone();
    std::thread::spawn(move || {
        let got = common::send(addr, "GET", "/faults/", &[("x-fault", "loop")], b"");
        let _ = slow_tx.send(("runaway", got.status.as_u16()));
    });
    std::thread::spawn(move || {
        // Several requests, so some land on the worker running the loop.
        for _ in 0..6 {
            assert_eq!(common::get(addr, "/other/").status, 200);
        }
        let _ = tx.send(("others", 200));
    });
    let first = rx.recv().unwrap();
    let second = rx.recv().unwrap();
    assert_eq!(first, ("others", 200));
    assert_eq!(second, ("runaway", 500));
    gw.stop();
}

#[test]
fn two_apis_defining_the_same_globals_each_see_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "a",
        &up,
        js(DEFAULT, "pre", "mw", fixture("clash_a.js")),
    );
    write(
        dir.path(),
        "b",
        &up,
        js(DEFAULT, "pre", "mw", fixture("clash_b.js")),
    );
    let gw = common::start_gateway(dir.path());
    for _ in 0..4 {
        assert_eq!(
            common::get(gw.addr, "/a/").json()["headers"]["X-Owner"],
            "a"
        );
        assert_eq!(
            common::get(gw.addr, "/b/").json()["headers"]["X-Owner"],
            "b"
        );
    }
    gw.stop();
}

#[test]
fn a_broken_script_fails_its_api_only() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    write(
        dir.path(),
        "bad",
        &up,
        js(DEFAULT, "pre", "broken", fixture("syntax_error.js")),
    );
    write(
        dir.path(),
        "noobj",
        &up,
        js(DEFAULT, "pre", "missingObj", fixture("no_object.js")),
    );
    write(
        dir.path(),
        "good",
        &up,
        js(DEFAULT, "pre", "mw", fixture("clash_a.js")),
    );
    // A disabled entry first: the error must still name the entry as written.
    let missing = json!({ "driver": "otto", "pre": [
        { "name": "mw", "path": fixture("clash_a.js"), "disabled": true },
        { "name": "mw", "path": "/nonexistent/mw.js" },
    ]});
    write(dir.path(), "missing", &up, missing);
    let gw = common::start_gateway(dir.path());
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("missing.json")
            && e.contains("custom_middleware.pre[1].path")
            && e.contains("/nonexistent/mw.js")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("bad.json")
            && e.contains("syntax_error.js")
            && e.contains("line 4")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("noobj.json") && e.contains("missingObj")),
        "{errors:?}"
    );
    assert_eq!(common::get(gw.addr, "/good/").status, 200);
    // Fails closed: routed, answering 500, never falling through.
    assert_eq!(common::get(gw.addr, "/bad/").status, 500);
    gw.stop();
}

/// A script whose value is `depth` parentheses deep and whose middleware
/// `name` stamps it in `X-Depth`.
fn nested_script(dir: &Path, name: &str, depth: usize) -> String {
    let text = format!(
        "var depth = {open}1{close};\n\
         var {name} = new TykJS.TykMiddleware.NewMiddleware({{}});\n\
         {name}.NewProcessRequest(function (request, session) {{\n\
         request.SetHeaders[\"X-Depth\"] = String(depth);\n\
         return {name}.ReturnData(request, {{}});\n\
         }});\n",
        open = "(".repeat(depth),
        close = ")".repeat(depth),
    );
    let path = dir.join(format!("{name}.js"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_script_nested_too_deep_for_boa_fails_its_api_only() {
    // boa's parser recurses per level with no check of its own: before the
    // load moved to a script thread and checked in a child process, 300
    // levels aborted the gateway at start-up (8 MiB main thread; this test
    // thread has 2 MiB), and 50,000 abort it on any thread.
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", common::mock());
    let deep = nested_script(dir.path(), "deepMw", 50_000);
    // Longer than the length shortcut allows (a child proves it fits), and
    // parsed again per request by the fresh strategy on VM threads.
    let nested = nested_script(dir.path(), "nestedMw", 1_000);
    write(
        dir.path(),
        "deep",
        &up,
        js(DEFAULT, "pre", "deepMw", deep.clone()),
    );
    for mode in [DEFAULT, ("boa", "fresh"), ("boa", "tyk-json")] {
        let id = format!("nested-{}", mode.1);
        write(
            dir.path(),
            &id,
            &up,
            js(mode, "pre", "nestedMw", nested.clone()),
        );
    }
    write(
        dir.path(),
        "good",
        &up,
        js(DEFAULT, "pre", "mw", fixture("clash_a.js")),
    );
    let gw = common::start_gateway(dir.path());
    let errors: Vec<String> = gw.load_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &gw.load_errors[0];
    assert_eq!(e.field, "custom_middleware.pre[0].path", "{e}");
    assert!(
        errors[0].contains("deep.json") && errors[0].contains(&deep),
        "{e}"
    );
    assert!(e.message.contains("nests deeper than boa can parse"), "{e}");
    for _ in 0..3 {
        assert_internal_error(&common::get(gw.addr, "/deep/"));
        for id in ["nested-", "nested-fresh", "nested-tyk-json"] {
            let echo = common::get(gw.addr, &format!("/{id}/"));
            assert_eq!(echo.status, 200, "{id}: {}", echo.text());
            assert_eq!(echo.json()["headers"]["X-Depth"], "1", "{id}");
        }
        assert_eq!(common::get(gw.addr, "/good/").status, 200);
    }
    gw.stop();
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
