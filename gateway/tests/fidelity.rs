//! Tyk fidelity through the real gateway: broken middleware fails closed and
//! never falls through to a shorter listen path, internal APIs are not
//! routed, error answers are Tyk's templates byte for byte, listen paths and
//! `config_data_disabled` as Tyk treats them, and every field Tyk acts on
//! that we do not is named at load.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use gateway::server::GatewayConfig;
use serde_json::{json, Value};

const SECRET: &str = "fidelity-secret";

/// A JS middleware that stamps `X-Stamped` and reports what `spec.config_data` is.
const STAMP_JS: &str = r#"
var stamp = new TykJS.TykMiddleware.NewMiddleware({});
stamp.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Stamped"] = "yes";
    request.SetHeaders["X-Config"] = JSON.stringify(spec.config_data === undefined ? "undefined" : spec.config_data);
    return stamp.ReturnData(request, {});
});
"#;

fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn js_mw(name: &str, path: &str) -> Value {
    json!({"driver": "otto", "pre": [{"name": name, "path": path}]})
}

fn start(dir: &Path) -> TestGateway {
    start_gateway_with(GatewayConfig {
        apis_dir: dir.to_path_buf(),
        threads: 2,
        secret: Some(SECRET.into()),
        ..GatewayConfig::default()
    })
}

fn tyk_apis(gw: &TestGateway) -> Value {
    send(
        gw.addr,
        "GET",
        "/tyk/apis",
        &[("x-tyk-authorization", SECRET)],
        b"",
    )
    .json()
}

/// `GET /tyk/apis`'s warnings as (file, field, message).
fn load_warnings(listing: &Value) -> Vec<(String, String, String)> {
    listing["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap().to_string();
            (s("file"), s("field"), s("error"))
        })
        .collect()
}

/// Tyk's `templates/error.json`, rendered, with Tyk's headers.
fn assert_tyk_json_error(got: &Got, status: u16, message: &str) {
    assert_eq!(got.status.as_u16(), status, "{}", got.text());
    assert_eq!(got.text(), format!("{{\n    \"error\": \"{message}\"\n}}"));
    assert_eq!(got.headers["content-type"], "application/json");
    assert_eq!(got.headers["x-generator"], "tyk.io");
}

#[test]
fn middleware_that_cannot_load_fails_closed_beside_a_catch_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    let js = |name: &str, text: &str| write_file(d, name, text);
    let syntax = js(
        "syntax.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({};\n",
    );
    let other = js(
        "other.js",
        "var somethingElse = new TykJS.TykMiddleware.NewMiddleware({});\n",
    );
    let throws_first = js(
        "throws_first.js",
        &format!("throw new Error(\"thrown before the object\");\n{STAMP_JS}"),
    );
    let cases: Vec<(&str, Value)> = vec![
        ("jsmissing", js_mw("stamp", "/nonexistent/stamp.js")),
        ("jssyntax", js_mw("mw", &syntax)),
        ("jsnoobject", js_mw("stamp", &other)),
        ("jsthrowsfirst", js_mw("stamp", &throws_first)),
        (
            "nativemissing",
            json!({"driver": "goplugin", "pre": [{"name": "AddHeader", "path": "/nonexistent/lib.so"}]}),
        ),
        (
            "response",
            json!({"driver": "otto", "response": [{"name": "stamp", "path": "x.js"}]}),
        ),
    ];
    write_api(d, "root", &api_json("root", "/", &t, false, Value::Null));
    for (name, mw) in &cases {
        write_api(
            d,
            name,
            &api_json(name, &format!("/{name}/"), &t, true, mw.clone()),
        );
    }
    let mut keyed = api_json("keyed", "/keyed/", &t, true, Value::Null);
    keyed["use_keyless"] = json!(false);
    write_api(d, "keyed", &keyed);
    let mut bundle = api_json("bundle", "/bundle/", &t, true, Value::Null);
    bundle["custom_middleware_bundle"] = json!("bundle-1.zip");
    write_api(d, "bundle", &bundle);
    let mut ips = api_json("ips", "/ips/", &t, true, Value::Null);
    ips["enable_ip_whitelisting"] = json!(true);
    ips["allowed_ips"] = json!(["10.9.9.9"]);
    write_api(d, "ips", &ips);

    let gw = start(d);
    let failing: Vec<String> = cases
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(["keyed", "bundle", "ips"].map(String::from))
        .collect();
    for name in &failing {
        for path in [format!("/{name}/x"), format!("/{name}/")] {
            let got = send(gw.addr, "POST", &path, &[], b"payload");
            assert_tyk_json_error(&got, 500, "Internal Server Error");
        }
    }
    assert_eq!(
        rec.count(),
        0,
        "a failing API proxied: {:?}",
        rec.requests()
    );
    // The catch-all itself works: only the failing APIs' traffic is stopped.
    assert_eq!(get(gw.addr, "/elsewhere").status, 200);
    assert_eq!(rec.last().uri, "/elsewhere");

    let listing = tyk_apis(&gw);
    for name in &failing {
        let api = listing["apis"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["api_id"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not listed: {listing:#}"));
        assert_eq!(api["status"], "failing", "{api:#}");
        let error = api["error"].as_str().unwrap();
        assert!(error.contains(&format!("{name}.json")), "{error}");
        assert!(
            gw.load_errors
                .iter()
                .any(|e| e.file.ends_with(format!("{name}.json"))),
            "{name}: {:?}",
            gw.load_errors
        );
    }
    let error_of = |name: &str| {
        let e = gw
            .load_errors
            .iter()
            .find(|e| e.file.ends_with(format!("{name}.json")));
        e.map(|e| e.to_string()).unwrap()
    };
    assert!(error_of("jsthrowsfirst").contains("thrown before the object"));
    assert!(error_of("jsnoobject").contains("\"stamp\""));
    assert!(error_of("keyed").contains("use_keyless"));
    assert!(error_of("ips").contains("allowed_ips"));
    gw.stop();
}

#[test]
fn a_top_level_throw_after_the_object_is_defined_only_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let script = write_file(
        dir.path(),
        "throws_after.js",
        &format!("{STAMP_JS}\nthrow new Error(\"thrown after the object\");\n"),
    );
    let def = api_json(
        "after",
        "/after/",
        &format!("http://{up}"),
        true,
        js_mw("stamp", &script),
    );
    write_api(dir.path(), "after", &def);
    let gw = start(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for _ in 0..3 {
        assert_eq!(get(gw.addr, "/after/x").status, 200);
        assert_eq!(rec.last().headers["x-stamped"], "yes");
    }
    gw.stop();
}

#[test]
fn internal_apis_are_never_routed_from_outside() {
    let dir = tempfile::tempdir().unwrap();
    let (internal_up, internal_rec) = recorder();
    let (public_up, public_rec) = recorder();
    let mut internal = api_json(
        "int",
        "/int/",
        &format!("http://{internal_up}"),
        true,
        Value::Null,
    );
    internal["internal"] = json!(true);
    write_api(dir.path(), "int", &internal);
    let gw = start(dir.path());
    assert_eq!(get(gw.addr, "/int/x").status, 404);
    let listing = tyk_apis(&gw);
    assert_eq!(listing["apis"][0]["status"], "internal", "{listing:#}");
    gw.stop();

    // Beside a catch-all, as in Tyk, the path is the catch-all's.
    let root = api_json(
        "root",
        "/",
        &format!("http://{public_up}"),
        false,
        Value::Null,
    );
    write_api(dir.path(), "root", &root);
    let gw = start(dir.path());
    assert_eq!(get(gw.addr, "/int/x").status, 200);
    assert_eq!(public_rec.last().uri, "/int/x");
    assert_eq!(internal_rec.count(), 0);
    gw.stop();
}

#[test]
fn error_answers_are_tyks_templates_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, _slow_rec) = recorder_with_delay(Duration::from_secs(3));
    let throws = write_file(
        dir.path(),
        "throws.js",
        "var mw = new TykJS.TykMiddleware.NewMiddleware({});\n\
         mw.NewProcessRequest(function (request) { throw new Error(\"boom\"); });\n",
    );
    let held = dead_addr();
    let dead = format!("http://{held}");
    write_api(
        dir.path(),
        "dead",
        &api_json("dead", "/dead/", &dead, true, Value::Null),
    );
    write_api(
        dir.path(),
        "slow",
        &api_json(
            "slow",
            "/slow/",
            &format!("http://{slow}"),
            true,
            Value::Null,
        ),
    );
    write_api(
        dir.path(),
        "js",
        &api_json("js", "/js/", &dead, true, js_mw("mw", &throws)),
    );
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        upstream_timeout: Duration::from_millis(300),
        ..GatewayConfig::default()
    });

    let problem = "There was a problem proxying the request";
    assert_tyk_json_error(&get(gw.addr, "/dead/x"), 500, problem);
    assert_tyk_json_error(&get(gw.addr, "/js/x"), 500, "Internal Server Error");
    assert_tyk_json_error(
        &get(gw.addr, "/slow/x"),
        504,
        "Upstream service reached hard timeout.",
    );
    // JSON stays JSON whatever else the client says it sends.
    let got = send(
        gw.addr,
        "POST",
        "/dead/x",
        &[("content-type", "application/json")],
        b"{}",
    );
    assert_tyk_json_error(&got, 500, problem);

    for (sent, answered) in [
        ("application/xml", "application/xml"),
        ("text/xml; charset=utf-8", "text/xml"),
        ("application/soap+xml", "application/soap+xml"),
    ] {
        for path in ["/dead/x", "/js/x"] {
            let got = send(gw.addr, "POST", path, &[("content-type", sent)], b"<a/>");
            assert_eq!(got.status, 500);
            assert_eq!(got.headers["content-type"], answered, "{sent}");
            assert_eq!(got.headers["x-generator"], "tyk.io");
            let message = if path == "/js/x" {
                "Internal Server Error"
            } else {
                problem
            };
            assert_eq!(
                got.text(),
                format!(
                    "<?xml version = \"1.0\" encoding = \"UTF-8\"?>\n<error>{message}</error>\n"
                )
            );
        }
    }

    // No API matches: Tyk's router's bare text, no template.
    let got = get(gw.addr, "/nowhere");
    assert_eq!(
        (got.status.as_u16(), got.text().as_str()),
        (404, "Not Found")
    );
    assert_eq!(got.headers["content-type"], "text/plain; charset=utf-8");
    assert!(got.headers.get("x-generator").is_none());
    gw.stop();
}

#[test]
fn listen_paths_are_normalised_as_tyk_does() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    write_api(
        dir.path(),
        "a",
        &api_json("a", "noslash/", &t, true, Value::Null),
    );
    write_api(
        dir.path(),
        "b",
        &api_json("b", "/x/../dotted//", &t, true, Value::Null),
    );
    let gw = start(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    assert_eq!(get(gw.addr, "/noslash/hi").status, 200);
    assert_eq!(rec.last().uri, "/hi");
    assert_eq!(get(gw.addr, "/dotted/there").status, 200);
    assert_eq!(rec.last().uri, "/there");
    let listing = tyk_apis(&gw);
    let mut paths: Vec<&str> = listing["apis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["listen_path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/dotted/", "/noslash/"]);
    gw.stop();
}

#[test]
fn config_data_disabled_hides_config_data_from_middleware() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    let script = write_file(dir.path(), "stamp.js", STAMP_JS);
    for (name, disabled) in [("shown", false), ("hidden", true)] {
        let mut def = api_json(
            name,
            &format!("/{name}/"),
            &t,
            true,
            js_mw("stamp", &script),
        );
        def["config_data"] = json!({"foo": "bar"});
        def["config_data_disabled"] = json!(disabled);
        write_api(dir.path(), name, &def);
    }
    let gw = start(dir.path());
    assert_eq!(get(gw.addr, "/shown/").status, 200);
    assert_eq!(rec.last().headers["x-config"], r#"{"foo":"bar"}"#);
    assert_eq!(get(gw.addr, "/hidden/").status, 200);
    let hidden = rec.last().headers["x-config"].to_str().unwrap().to_string();
    assert!(
        !hidden.contains("bar"),
        "config_data reached the middleware: {hidden}"
    );
    gw.stop();
}

#[test]
fn fields_tyk_acts_on_and_we_do_not_are_named_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    let mut def = api_json("busy", "/busy/", &t, true, Value::Null);
    def["CORS"] = json!({"enable": true, "allowed_origins": ["*"]});
    def["global_rate_limit"] = json!({"rate": 10, "per": 1});
    def["domain"] = json!("api.example.com");
    def["listen_port"] = json!(9999);
    def["proxy"]["enable_load_balancing"] = json!(true);
    def["proxy"]["target_list"] = json!([t.clone(), t.clone()]);
    def["proxy"]["strip_listen_pth"] = json!(true);
    def["custom_middlware"] = json!({});
    def["version_data"] = json!({"not_versioned": true, "versions": {"Default": {
        "name": "Default", "use_extended_paths": true,
        "global_headers": {"X-Added": "1"},
        "extended_paths": {"url_rewrites": [{"path": "/a", "method": "GET", "match_pattern": "/a", "rewrite_to": "/b"}],
                           "ignored": []}}}});
    write_api(dir.path(), "busy", &def);
    // The seed's own definitions say nothing: their off values stay quiet.
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../apis/plain-hello.json");
    let mut plain: Value = serde_json::from_slice(&std::fs::read(seed).unwrap()).unwrap();
    plain["proxy"]["target_url"] = json!(t);
    write_api(dir.path(), "plain", &plain);

    let gw = start(dir.path());
    let listing = tyk_apis(&gw);
    let warnings = load_warnings(&listing);
    assert!(
        warnings.iter().all(|(f, _, _)| f.ends_with("busy.json")),
        "{warnings:#?}"
    );
    let field = |name: &str| {
        warnings
            .iter()
            .find(|(_, f, _)| f == name)
            .map(|(_, _, e)| e.as_str())
            .unwrap_or_else(|| panic!("no warning for {name}: {warnings:#?}"))
    };
    for name in [
        "CORS.enable",
        "global_rate_limit",
        "domain",
        "listen_port",
        "proxy.target_list",
        "version_data.versions.Default.global_headers",
        "version_data.versions.Default.extended_paths.url_rewrites",
    ] {
        assert!(
            field(name).ends_with("not implemented: requests are served without it"),
            "{name}: {}",
            field(name)
        );
    }
    assert_eq!(
        field("custom_middlware"),
        "unknown field, ignored: did you mean \"custom_middleware\"?"
    );
    assert!(field("proxy.strip_listen_pth").contains("\"proxy.strip_listen_path\""));
    assert_eq!(warnings.len(), 9, "{warnings:#?}");
    // Served anyway, without them.
    assert_eq!(get(gw.addr, "/busy/x").status, 200);
    assert!(rec.last().headers.get("x-added").is_none());
    assert_eq!(get(gw.addr, "/plain/x").status, 200);
    gw.stop();
}

/// An API whose requests the gateway's own endpoints answer first is named
/// at load: a listen path under `/tyk` while the control API is on (every
/// request), and `/hello` (its GET and HEAD of `/hello` itself). Without
/// a secret, `/tyk/...` is an ordinary path and is served.
#[test]
fn listen_paths_the_gateways_own_endpoints_answer_are_named_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    write_api(
        dir.path(),
        "ctl",
        &api_json("ctl", "/tyk/mine/", &t, true, Value::Null),
    );
    write_api(
        dir.path(),
        "hi",
        &api_json("hi", "/hello/", &t, true, Value::Null),
    );
    write_api(
        dir.path(),
        "fine",
        &api_json("fine", "/tykish/", &t, true, Value::Null),
    );

    let gw = start(dir.path());
    let listing = tyk_apis(&gw);
    let warnings = load_warnings(&listing);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    let about = |file: &str| {
        warnings
            .iter()
            .find(|(f, field, _)| f.ends_with(file) && field == "proxy.listen_path")
            .map(|(_, _, e)| e.clone())
            .unwrap_or_else(|| panic!("no warning for {file}: {warnings:#?}"))
    };
    assert!(
        about("ctl.json").contains("control API"),
        "{}",
        about("ctl.json")
    );
    assert!(
        about("hi.json").contains("health check"),
        "{}",
        about("hi.json")
    );
    // What the warnings say is what happens.
    assert_eq!(get(gw.addr, "/tyk/mine/x").status, 403);
    assert_eq!(get(gw.addr, "/hello").json()["status"], "pass");
    assert_eq!(get(gw.addr, "/hello/x").status, 200);
    assert_eq!(get(gw.addr, "/tykish/x").status, 200);
    assert_eq!(rec.count(), 2);
    gw.stop();

    // No secret: no control API, so /tyk/mine/ is served, and not named.
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    let named: Vec<_> = gw
        .load_warnings
        .iter()
        .map(|w| w.file.display().to_string())
        .collect();
    assert!(
        named.len() == 1 && named[0].ends_with("hi.json"),
        "{named:#?}"
    );
    assert_eq!(get(gw.addr, "/tyk/mine/x").status, 200);
    assert_eq!(rec.count(), 3);
    gw.stop();
}
