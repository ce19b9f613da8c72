//! Virtual endpoints (`extended_paths.virtual`) on both JS engines through
//! the real gateway: Tyk's `TykJsResponse({Body, Code, Headers}, meta)`,
//! file and base64 blob sources, path matching as Tyk's extended paths,
//! `proxy_on_error`, the response chain on their answers, and virtual
//! endpoints beside a native driver.

mod common;
mod js_phases;
mod native_common;

use base64::Engine as _;
use common::*;
use js_phases::*;
use serde_json::{json, Value};

/// Tyk's own virtual endpoint test function, and a few more.
const VIRTUAL_JS: &str = r#"
function testVirtData(request, session, config) {
    var resp = {
        Body: JSON.stringify({url: request.URL, params: request.Params,
            key: request.Headers["X-Api-Key"], body: request.Body}),
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
function notJson(request, session, config) {
    return {Body: "an object, not TykJsResponse's string", Code: 200};
}
"#;

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

#[test]
fn virtual_endpoints_answer_from_js_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let blob = base64::engine::general_purpose::STANDARD.encode(VIRTUAL_JS);
    for engine in ENGINES {
        let mut on_error = endpoint("throwing", "/fallback", "GET", ("file", &file));
        on_error["proxy_on_error"] = json!(true);
        let endpoints = json!([
            endpoint("testVirtData", "/users/{id}", "GET", ("file", &file)),
            endpoint("testVirtData", "/blob$", "POST", ("blob", &blob)),
            endpoint("throwing", "/broken", "GET", ("file", &file)),
            endpoint("notJson", "/object", "GET", ("file", &file)),
            on_error,
        ]);
        let def = api(engine, &format!("http://{up}"), engine, endpoints);
        write_api(dir.path(), engine, &def);
    }
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
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
                   "params": {"a": ["1", "2"]}, "key": ["k1"], "body": ""}),
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
        // No match (method, path): proxied.
        assert_eq!(get(gw.addr, &format!("/{engine}/blob")).text(), "recorded");
        assert_eq!(
            get(gw.addr, &format!("/{engine}/users/")).text(),
            "recorded"
        );
        // A failing function: Tyk's 500, or the upstream with proxy_on_error.
        for path in ["broken", "object"] {
            let r = get(gw.addr, &format!("/{engine}/{path}"));
            assert_eq!(r.status, 500, "{engine} {path}");
            assert_eq!(
                r.text(),
                "{\n    \"error\": \"Error during virtual endpoint execution. Contact Administrator for more details.\"\n}",
                "{engine} {path}"
            );
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
    let p = native_common::plugins();
    let mut def = native_common::native_api(
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

#[test]
fn broken_virtual_endpoints_fail_their_api_closed_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let file = script(dir.path(), "virt.js", VIRTUAL_JS);
    let t = format!("http://{up}");
    let at = "version_data.versions.Default.extended_paths.virtual[0]";
    let cases = [
        (
            "nofn",
            endpoint("missingFn", "/v", "GET", ("file", &file)),
            "response_function_name",
        ),
        (
            "nofile",
            endpoint("f", "/v", "GET", ("file", "/no/such.js")),
            "function_source_uri",
        ),
        (
            "badblob",
            endpoint("f", "/v", "GET", ("blob", "%%%")),
            "function_source_uri",
        ),
        (
            "badtype",
            endpoint("f", "/v", "GET", ("url", "x")),
            "function_source_type",
        ),
        (
            "badpath",
            endpoint("f", "/(v", "GET", ("file", &file)),
            "path",
        ),
    ];
    for (id, e, _) in &cases {
        write_api(dir.path(), id, &api(id, &t, "boa", json!([e])));
    }
    let gw = start_gateway(dir.path());
    for (id, _, field) in &cases {
        let e = gw
            .load_errors
            .iter()
            .find(|e| e.file.ends_with(format!("{id}.json")))
            .unwrap_or_else(|| panic!("{id}: no load error: {:?}", gw.load_errors));
        assert_eq!(e.field, format!("{at}.{field}"), "{id}: {e}");
        // Routed, failing closed: never proxied, not even off the path.
        assert_eq!(get(gw.addr, &format!("/{id}/other")).status, 500, "{id}");
    }
    assert_eq!(rec.count(), 0);
    gw.stop();
}
