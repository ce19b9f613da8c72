//! Virtual endpoints (`extended_paths.virtual`) on both JS engines through
//! the real gateway: Tyk's `TykJsResponse({Body, Code, Headers}, meta)`,
//! file and base64 blob sources, path matching as Tyk's extended paths,
//! `proxy_on_error`, the response chain on their answers, and virtual
//! endpoints beside a native driver.

mod common;
mod js_phases;

use base64::Engine as _;
use common::*;
use js_phases::*;
use serde_json::{json, Value};

/// Tyk's own virtual endpoint test function, and a few more.
const VIRTUAL_JS: &str = r#"
function testVirtData(request, session, config) {
    var resp = {
        Body: JSON.stringify({url: request.URL, params: request.Params,
            key: request.Headers["X-Api-Key"], body: request.Body,
            keys: Object.keys(request)}),
        Headers: {
            "data-foo": config.config_data.foo,
            "data-bar-y": config.config_data.bar.y.toString()
        },
        Code: 202
    };
    return TykJsResponse(resp, session.meta_data);
}
function throwing(request, session, config) {
    throw new Error("virtual failure");
}
// Go's decoder reads field names in any case and a lone surrogate as
// U+FFFD; a null Code leaves the one before it.
function goRules(request, session, config) {
    return TykJsResponse({body: "lone \ud800 surrogate", code: 201, Code: null,
                          headers: {"X-Go": "1"}}, {});
}
// Tyk loops a redirect to tyk:// internally; that is not implemented here.
function tykLoop(request, session, config) {
    return TykJsResponse({Body: "", Code: 302, Headers: {"Location": "tyk://self/elsewhere"}}, {});
}
function notJson(request, session, config) {
    return {Body: "an object, not TykJsResponse's string", Code: 200};
}
// An object 20,000 levels deep instead of the string: it fails as any
// other wrong answer does, its kind named in the log, not its contents.
function deepObject(request, session, config) {
    var d = {};
    for (var i = 0; i < 20000; i++) { d = {a: d}; }
    return d;
}
"#;

/// Tyk's answer to a virtual endpoint that cannot answer.
const FAILED: &str = "{\n    \"error\": \"Error during virtual endpoint execution. Contact Administrator for more details.\"\n}";

fn endpoint(function: &str, path: &str, method: &str, source: (&str, &str)) -> Value {
    json!({
        "response_function_name": function,
        "function_source_type": source.0,
        "function_source_uri": source.1,
        "path": path,
        "method": method,
        "use_session": false,
        "proxy_on_error": false
    })
}

fn api(id: &str, target: &str, engine: &str, endpoints: Value) -> Value {
    let mut def = api_json(
        id,
        &format!("/{id}/"),
        target,
        true,
        json!({"engine": engine}),
    );
    def["version_data"] = virtual_version(endpoints);
    def["config_data"] = json!({"foo": "x", "bar": {"y": 3}});
    def
}

/// Writes one API per engine on `/<prefix><engine>/`, proxying to `up`,
/// with the virtual endpoints `endpoints()` gives, and serves them all.
fn serve_per_engine(
    dir: &std::path::Path,
    up: std::net::SocketAddr,
    prefix: &str,
    endpoints: impl Fn() -> Value,
) -> TestGateway {
    for engine in ENGINES {
        let id = format!("{prefix}{engine}");
        let def = api(&id, &format!("http://{up}"), engine, endpoints());
        write_api(dir, &id, &def);
    }
    let gw = start_gateway(dir);
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    gw
}

#[test]
fn virtual_endpoints_answer_from_js_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let blob = base64::engine::general_purpose::STANDARD.encode(VIRTUAL_JS);
    let gw = serve_per_engine(dir.path(), up, "", || {
        let mut on_error = endpoint("throwing", "/fallback", "GET", ("file", &file));
        on_error["proxy_on_error"] = json!(true);
        json!([
            endpoint("testVirtData", "/users/{id}", "GET", ("file", &file)),
            endpoint("testVirtData", "/blob$", "POST", ("blob", &blob)),
            endpoint("throwing", "/broken", "GET", ("file", &file)),
            endpoint("notJson", "/object", "GET", ("file", &file)),
            endpoint("deepObject", "/deep", "GET", ("file", &file)),
            endpoint("goRules", "/go", "GET", ("file", &file)),
            endpoint("tykLoop", "/loop", "GET", ("file", &file)),
            on_error,
        ])
    });
    for engine in ENGINES {
        // Tyk's test: Code, Body and Headers, config_data in the spec.
        let r = send(
            gw.addr,
            "GET",
            &format!("/{engine}/users/42?a=1&a=2"),
            &[("x-api-key", "k1")],
            b"",
        );
        assert_eq!(r.status, 202, "{engine}: {}", r.text());
        assert_eq!(r.headers["data-foo"], "x", "{engine}");
        assert_eq!(r.headers["data-bar-y"], "3", "{engine}");
        assert_eq!(r.headers["server"], "tyk", "{engine}");
        assert_eq!(
            r.headers["content-type"], "text/plain; charset=utf-8",
            "{engine}"
        );
        assert_eq!(
            r.json(),
            json!({"url": format!("/{engine}/users/42?a=1&a=2"),
                   "params": {"a": ["1", "2"]}, "key": ["k1"], "body": "",
                   // Tyk's RequestObject, in its fields' order.
                   "keys": ["Headers", "Body", "URL", "Params", "Scheme"]}),
            "{engine}"
        );
        // A blob source; the method must match exactly, and a form body's
        // values come before the query's, as in Go's r.Form.
        let r = send(
            gw.addr,
            "POST",
            &format!("/{engine}/blob?a=2"),
            &[("content-type", "application/x-www-form-urlencoded")],
            b"a=1",
        );
        assert_eq!(r.status, 202, "{engine}: {}", r.text());
        assert_eq!(r.json()["params"], json!({"a": ["1", "2"]}), "{engine}");
        let r = get(gw.addr, &format!("/{engine}/go"));
        assert_eq!(r.status, 201, "{engine}: {}", r.text());
        assert_eq!(r.text(), "lone \u{fffd} surrogate", "{engine}");
        assert_eq!(r.headers["x-go"], "1", "{engine}");
        // No match (method, path): proxied.
        assert_eq!(get(gw.addr, &format!("/{engine}/blob")).text(), "recorded");
        assert_eq!(
            get(gw.addr, &format!("/{engine}/users/")).text(),
            "recorded"
        );
        // A failing function: Tyk's 500, or the upstream with proxy_on_error.
        for path in ["broken", "object", "deep", "loop"] {
            let r = get(gw.addr, &format!("/{engine}/{path}"));
            assert_eq!(r.status, 500, "{engine} {path}");
            assert_eq!(r.text(), FAILED, "{engine} {path}");
        }
        assert_eq!(
            get(gw.addr, &format!("/{engine}/fallback")).text(),
            "recorded"
        );
    }
    // Proxied: 2 misses and 1 proxy_on_error per engine.
    assert_eq!(rec.count(), 6);
    gw.stop();
}

/// Stamps every response, the virtual endpoints' included.
const STAMP_RESPONSE_JS: &str = r#"
var stampResp = new TykJS.TykMiddleware.NewMiddleware({});
stampResp.NewProcessResponse(function (response, request, session, spec) {
    response.SetHeaders["X-Stamped"] = String(response.StatusCode);
    return stampResp.ReturnResponseData(response, {});
});
"#;

#[test]
fn virtual_answers_pass_the_response_chain_and_serve_beside_a_native_driver() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let stamp = script(dir.path(), "stamp.js", STAMP_RESPONSE_JS);
    for engine in ENGINES {
        let id = format!("chain-{engine}");
        let mut def = api(
            &id,
            &format!("http://{up}"),
            engine,
            json!([endpoint("testVirtData", "/v", "GET", ("file", &file))]),
        );
        def["custom_middleware"] = json!({"driver": "otto", "engine": engine,
            "response": [{"name": "stampResp", "path": stamp}]});
        write_api(dir.path(), &id, &def);
    }
    // A native request middleware, and a JS virtual endpoint, on one API.
    let p = common::native::plugins();
    let mut def = common::native::native_api(
        "mixed",
        "/mixed/",
        &up.to_string(),
        &[(&p.test, "EditHeaders")],
        &[],
    );
    def["version_data"] = virtual_version(json!([endpoint(
        "testVirtData",
        "/v",
        "GET",
        ("file", &file)
    )]));
    def["config_data"] = json!({"foo": "n", "bar": {"y": 1}});
    write_api(dir.path(), "mixed", &def);
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for engine in ENGINES {
        let r = get(gw.addr, &format!("/chain-{engine}/v"));
        assert_eq!(r.status, 202, "{engine}");
        assert_eq!(r.headers["x-stamped"], "202", "{engine}");
        let r = get(gw.addr, &format!("/chain-{engine}/other"));
        assert_eq!(r.headers["x-stamped"], "200", "{engine}");
    }
    let r = get(gw.addr, "/mixed/v");
    assert_eq!(r.status, 202);
    assert_eq!(r.headers["data-foo"], "n");
    assert_eq!(get(gw.addr, "/mixed/other").status, 200);
    assert_eq!(
        rec.last().headers["x-set"],
        "replaced",
        "the native pre ran"
    );
    assert_eq!(rec.count(), 3);
    gw.stop();
}

/// Everything the gateway logs in this test binary (tests run in
/// parallel: each looks for its own API's lines).
fn captured_log() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static std::sync::Mutex<Vec<u8>>> =
        std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log: &'static std::sync::Mutex<Vec<u8>> =
            Box::leak(Box::new(std::sync::Mutex::new(Vec::new())));
        struct Sink(&'static std::sync::Mutex<Vec<u8>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(log))
            .try_init();
        log
    })
}

#[test]
fn a_broken_virtual_endpoint_fails_only_its_path_naming_the_field() {
    let log = captured_log();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let syntax = script(dir.path(), "syntax.js", "function f( {");
    // Nested past what boa's parser can take on a script thread (it would
    // abort the process): refused at load, as QuickJS refuses it.
    let deep = script(
        dir.path(),
        "deep.js",
        &format!(
            "function f() {{ return {}1{}; }}",
            "(".repeat(50_000),
            ")".repeat(50_000)
        ),
    );
    let blob = base64::engine::general_purpose::STANDARD.encode(VIRTUAL_JS);
    let mut proxied = endpoint("f", "/proxied", "GET", ("file", &syntax));
    proxied["proxy_on_error"] = json!(true);
    // (path, entry, the field its log line names; None: it serves).
    let cases = [
        (
            "good",
            endpoint("testVirtData", "/good", "GET", ("file", &file)),
            None,
        ),
        (
            "nofn",
            endpoint("missingFn", "/nofn", "GET", ("file", &file)),
            Some("[1].response_function_name"),
        ),
        (
            "nofile",
            endpoint("f", "/nofile", "GET", ("file", "/no/such.js")),
            Some("[2].function_source_uri"),
        ),
        (
            "badblob",
            endpoint("f", "/badblob", "GET", ("blob", "%%%")),
            Some("[3].function_source_uri"),
        ),
        (
            "badtype",
            endpoint("f", "/badtype", "GET", ("url", "x")),
            Some("[4].function_source_type"),
        ),
        (
            "syntax",
            endpoint("f", "/syntax", "GET", ("file", &syntax)),
            Some("[5].function_source_uri"),
        ),
        ("proxied", proxied, None),
        (
            "good2",
            endpoint("testVirtData", "/good2", "GET", ("blob", &blob)),
            None,
        ),
        // Its own file is missing, but virt.js defines its function: Tyk's
        // scripts share one VM, so it serves.
        (
            "elsewhere",
            endpoint(
                "testVirtData",
                "/elsewhere",
                "GET",
                ("file", "/no/such2.js"),
            ),
            None,
        ),
        (
            "deep",
            endpoint("f", "/deep", "GET", ("file", &deep)),
            Some("[9].function_source_uri"),
        ),
    ];
    let list: Vec<Value> = cases.iter().map(|c| c.1.clone()).collect();
    for engine in ENGINES {
        let id = format!("broken-{engine}");
        let def = api(&id, &format!("http://{up}"), engine, json!(list));
        write_api(dir.path(), &id, &def);
    }
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for engine in ENGINES {
        for (path, _, fails) in &cases {
            let r = get(gw.addr, &format!("/broken-{engine}/{path}"));
            match (fails, *path) {
                (Some(_), _) => {
                    assert_eq!(r.status, 500, "{engine} {path}: {}", r.text());
                    assert!(r.text().contains("Error during virtual endpoint execution"));
                }
                (None, "proxied") => assert_eq!(r.text(), "recorded", "{engine}"),
                (None, _) => assert_eq!(r.status, 202, "{engine} {path}: {}", r.text()),
            }
        }
        // The API's other paths are proxied as ever.
        assert_eq!(
            get(gw.addr, &format!("/broken-{engine}/other")).text(),
            "recorded"
        );
    }
    assert_eq!(rec.count(), 4);
    gw.stop();
    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let at = "version_data.versions.Default.extended_paths.virtual";
    for engine in ENGINES {
        let def = format!("broken-{engine}.json");
        for (path, _, field) in &cases {
            let Some(field) = field else { continue };
            let named = format!("{def}: {at}{field}");
            // Once at load, and in each failed request's line.
            let lines: Vec<&str> = text.lines().filter(|l| l.contains(&named)).collect();
            assert!(
                lines.iter().any(|l| l.contains("not loaded")
                    && l.contains(&format!("/{path} requests are answered 500"))),
                "{engine} {path}: no load line naming {named}:\n{text}"
            );
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains(&format!("API broken-{engine}: virtual endpoint"))),
                "{engine} {path}: no request line naming {named}:\n{text}"
            );
        }
        let served = format!("{def}: {at}[8].function_source_uri: cannot read /no/such2.js");
        assert!(
            text.lines()
                .any(|l| l.contains(&served) && l.contains("still serves")),
            "{engine}: the unread script is logged:\n{text}"
        );
        let syntax_line = text
            .lines()
            .find(|l| l.contains(&def) && l.contains("syntax.js"));
        assert!(
            syntax_line.is_some_and(|l| l.contains("does not compile")),
            "{engine}: {text}"
        );
        assert!(text.contains("/no/such.js"), "the missing file is named");
        let deep_line = text
            .lines()
            .find(|l| l.contains(&def) && l.contains("deep.js"));
        let why = if engine == "boa" {
            "nests deeper than boa can parse"
        } else {
            "Maximum call stack size exceeded"
        };
        assert!(
            deep_line.is_some_and(|l| l.contains("does not compile") && l.contains(why)),
            "{engine}: {text}"
        );
    }
}

#[test]
fn a_bad_path_pattern_still_fails_its_api_closed_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let t = format!("http://{up}");
    let bad = endpoint("f", "/(v", "GET", ("file", &file));
    write_api(
        dir.path(),
        "badpath",
        &api("badpath", &t, "boa", json!([bad])),
    );
    let gw = start_gateway(dir.path());
    let e = &gw.load_errors[0];
    assert_eq!(
        e.field, "version_data.versions.Default.extended_paths.virtual[0].path",
        "{e}"
    );
    // Routed, failing closed: never proxied, not even off the path.
    assert_eq!(get(gw.addr, "/badpath/other").status, 500);
    assert_eq!(rec.count(), 0);
    gw.stop();
}

/// Echoes what the function was given: the URL and the session argument.
const ECHO_JS: &str = r#"
function echo(request, session, config) {
    return TykJsResponse({Body: JSON.stringify({url: request.URL, session: session}), Code: 200}, {});
}
"#;

/// Tyk matches extended paths against `r.URL.Path`, the decoded path.
#[test]
fn virtual_paths_match_the_decoded_path_as_tyk_does() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "echo.js", ECHO_JS);
    let gw = serve_per_engine(dir.path(), up, "dec-", || {
        json!([
            endpoint("echo", "^/a b$", "GET", ("file", &file)),
            endpoint("echo", "^/files/{name}$", "GET", ("file", &file)),
        ])
    });
    for engine in ENGINES {
        let r = get(gw.addr, &format!("/dec-{engine}/a%20b"));
        assert_eq!(r.status, 200, "{engine}: {}", r.text());
        // The script still gets the URL as sent.
        assert_eq!(r.json()["url"], format!("/dec-{engine}/a%20b"), "{engine}");
        // Decoded once: %2520 is "%20", not a space.
        assert_eq!(
            get(gw.addr, &format!("/dec-{engine}/a%2520b")).text(),
            "recorded"
        );
        // An encoded slash is a slash to Tyk's matcher: {name} is one segment.
        let r = get(gw.addr, &format!("/dec-{engine}/files/x%2Fy"));
        assert_eq!(r.text(), "recorded", "{engine}");
        let r = get(gw.addr, &format!("/dec-{engine}/files/x%20y"));
        assert_eq!(r.status, 200, "{engine}");
    }
    assert_eq!(rec.count(), 4);
    gw.stop();
}

/// `use_session`: Tyk hands the function the request's session, and a
/// keyless API (every API here: there are no keys) has none, so the
/// argument is `null`; a function that reads `session.meta_data` (Tyk's
/// own sample) then fails its request as in Tyk. Without `use_session`
/// the argument is an empty session.
#[test]
fn use_session_hands_the_function_a_null_session() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let echo = script(dir.path(), "echo.js", ECHO_JS);
    let sample = script(dir.path(), "virt.js", VIRTUAL_JS);
    let gw = serve_per_engine(dir.path(), up, "sess-", || {
        let mut with = endpoint("echo", "/with-session", "GET", ("file", &echo));
        with["use_session"] = json!(true);
        let mut meta = endpoint("testVirtData", "/meta", "GET", ("file", &sample));
        meta["use_session"] = json!(true);
        let mut fallback = meta.clone();
        fallback["path"] = json!("/fallback");
        fallback["proxy_on_error"] = json!(true);
        json!([
            with,
            endpoint("echo", "/sessionless", "GET", ("file", &echo)),
            meta,
            fallback,
        ])
    });
    for engine in ENGINES {
        let r = get(gw.addr, &format!("/sess-{engine}/with-session"));
        assert_eq!(r.json()["session"], Value::Null, "{engine}: {}", r.text());
        let r = get(gw.addr, &format!("/sess-{engine}/sessionless"));
        assert_eq!(r.json()["session"], json!({}), "{engine}");
        let r = get(gw.addr, &format!("/sess-{engine}/meta"));
        assert_eq!(r.status, 500, "{engine}: session.meta_data of null");
        assert_eq!(
            get(gw.addr, &format!("/sess-{engine}/fallback")).text(),
            "recorded"
        );
    }
    assert_eq!(rec.count(), 2);
    gw.stop();
}

/// Answers chosen by the `X-Case` header: thrown errors, a big body, a
/// `SessionMeta` nested 100,000 deep, many headers, a header name HTTP
/// refuses, and a good answer.
const HOSTILE_JS: &str = r#"
function vHostile(request, session, config) {
    var kase = request.Headers["X-Case"] ? request.Headers["X-Case"][0] : "";
    if (kase === "throw") throw new Error("thrown for " + request.URL);
    if (kase === "big") {
        return TykJsResponse({Body: new Array(4 * 1024 * 1024 + 1).join("b"), Code: 200}, {});
    }
    if (kase === "deep") {
        var n = 100000;
        return '{"Response":{"Code":200},"SessionMeta":{"a":' +
            new Array(n + 1).join("[") + new Array(n + 1).join("]") + '}}';
    }
    if (kase === "headers") {
        var h = {};
        for (var i = 0; i < 90; i++) h["X-H" + i] = String(i);
        return TykJsResponse({Body: "h", Code: 200, Headers: h}, {});
    }
    if (kase === "bad-header") {
        return TykJsResponse({Body: "x", Code: 200, Headers: {"Bad Name": "v"}}, {});
    }
    return TykJsResponse({Body: "ok " + request.URL, Code: 200}, {});
}
"#;

#[test]
fn thousands_of_throws_and_hostile_answers_fail_only_their_own_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "hostile.js", HOSTILE_JS);
    let gw = serve_per_engine(dir.path(), up, "", || {
        json!([endpoint("vHostile", "/h", "GET", ("file", &file))])
    });
    for engine in ENGINES {
        let path = format!("/{engine}/h");
        let call = |kase: &str| send(gw.addr, "GET", &path, &[("x-case", kase)], b"");
        let (mut thrown, mut served) = (0, 0);
        for i in 0..2_000 {
            if i % 2 == 0 {
                let r = call("throw");
                assert_eq!((r.status.as_u16(), r.text().as_str()), (500, FAILED));
                thrown += 1;
            } else {
                let r = call("");
                assert_eq!(r.status, 200, "{engine} request {i}: {}", r.text());
                assert_eq!(r.text(), format!("ok /{engine}/h"));
                served += 1;
            }
        }
        assert_eq!((thrown, served), (1_000, 1_000), "{engine}");
        let big = call("big");
        assert_eq!(big.status, 200, "{engine}");
        assert_eq!(big.body.len(), 4 * 1024 * 1024, "{engine}");
        assert!(big.body.iter().all(|&b| b == b'b'), "{engine}");
        // SessionMeta's content is skipped without recursing, however deep
        // (Go's decoder stops at 10,000 levels; the answer is served here).
        let deep = call("deep");
        assert_eq!(
            (deep.status.as_u16(), deep.text().as_str()),
            (200, ""),
            "{engine}"
        );
        let bad = call("bad-header");
        assert_eq!(
            (bad.status.as_u16(), bad.text().as_str()),
            (500, FAILED),
            "{engine}"
        );
        let many = call("headers");
        assert_eq!(many.status, 200, "{engine}");
        assert_eq!(many.headers["x-h0"], "0", "{engine}");
        assert_eq!(many.headers["x-h89"], "89", "{engine}");
        assert_eq!(call("").text(), format!("ok /{engine}/h"), "{engine}");
    }
    // Nothing was proxied: every answer came from the function.
    assert_eq!(rec.count(), 0);
    gw.stop();
}
