//! What a JS script's own answers look like to the client, as Tyk gives
//! them, on both engines, through the real gateway and a recording
//! upstream: `ReturnOverrides` (error template, forced responses with
//! `Server: tyk` and Go's sniffed `Content-Type`), and the `spec` a script
//! sees under `config_data_disabled` (no `config_data` key, as Tyk's
//! `specToJson`), also for native plugins.

mod common;
mod js_phases;

use common::*;
use js_phases::*;
use serde_json::json;

/// `ReturnOverrides` chosen by the `X-Mode` header.
const OVERRIDES_JS: &str = r#"
var ovr = new TykJS.TykMiddleware.NewMiddleware({});
ovr.NewProcessRequest(function (request, session, spec) {
    var mode = (request.Headers["X-Mode"] || ["none"])[0];
    var ro = request.ReturnOverrides;
    if (mode === "error") {
        ro.ResponseCode = 403;
        ro.ResponseError = "go away";
        ro.ResponseBody = "ignored";
        ro.ResponseHeaders = { "X-Why": "policy" };
    } else if (mode === "body-message") {
        ro.ResponseCode = 401;
        ro.ResponseBody = "who \"are\" you";
    } else if (mode === "sniffed") {
        ro.ResponseCode = 200;
        ro.ResponseBody = '{"ok":true}';
    } else if (mode === "html") {
        ro.ResponseCode = 200;
        ro.ResponseBody = "<html><body>hi</body></html>";
    } else if (mode === "typed") {
        ro.ResponseCode = 201;
        ro.ResponseBody = '{"ok":true}';
        ro.ResponseHeaders["Content-Type"] = "application/json";
    } else if (mode === "override") {
        ro.ResponseCode = 418;
        ro.ResponseError = "short";
        ro.ResponseBody = "teapot body";
        ro.OverrideError = true;
    } else if (mode === "empty") {
        ro.ResponseCode = 204;
    } else if (mode === "loop") {
        ro.ResponseCode = 302;
        ro.ResponseHeaders["Location"] = "tyk://self/elsewhere";
    }
    return ovr.ReturnData(request, {});
});
"#;

fn mode(addr: std::net::SocketAddr, path: &str, m: &str) -> Got {
    send(addr, "GET", path, &[("x-mode", m)], b"")
}

#[test]
fn return_overrides_answer_as_tyk_does_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let js = script(dir.path(), "ovr.js", OVERRIDES_JS);
    for engine in ENGINES {
        let mw = json!({"pre": [{"name": "ovr", "path": js}]});
        let def = js_api(engine, &format!("http://{up}"), engine, mw);
        write_api(dir.path(), engine, &def);
    }
    let gw = start_gateway(dir.path());
    for engine in ENGINES {
        let path = format!("/{engine}/x");
        // A non-empty ResponseError replaces ResponseBody, in Tyk's
        // template, after the script's own headers.
        let r = mode(gw.addr, &path, "error");
        assert_eq!(r.status, 403, "{engine}");
        assert_eq!(r.text(), "{\n    \"error\": \"go away\"\n}", "{engine}");
        assert_eq!(r.headers["content-type"], "application/json", "{engine}");
        assert_eq!(r.headers["x-generator"], "tyk.io", "{engine}");
        assert_eq!(r.headers["x-why"], "policy", "{engine}");
        // >= 400 with no ResponseError: the body is the message.
        let r = mode(gw.addr, &path, "body-message");
        assert_eq!(r.status, 401, "{engine}");
        assert_eq!(
            r.text(),
            "{\n    \"error\": \"who \\\"are\\\" you\"\n}",
            "{engine}"
        );
        // The template follows the request's Content-Type.
        let r = send(
            gw.addr,
            "GET",
            &path,
            &[("x-mode", "error"), ("content-type", "text/xml")],
            b"",
        );
        assert_eq!(r.headers["content-type"], "text/xml", "{engine}");
        assert!(
            r.text().contains("<error>go away</error>"),
            "{engine}: {}",
            r.text()
        );
        // Forced responses: Server: tyk, and Go's sniffed type when the
        // script set none.
        let r = mode(gw.addr, &path, "sniffed");
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, r#"{"ok":true}"#)
        );
        assert_eq!(r.headers["server"], "tyk", "{engine}");
        assert_eq!(
            r.headers["content-type"], "text/plain; charset=utf-8",
            "{engine}"
        );
        assert!(r.headers.get("x-generator").is_none(), "{engine}");
        let r = mode(gw.addr, &path, "html");
        assert_eq!(
            r.headers["content-type"], "text/html; charset=utf-8",
            "{engine}"
        );
        let r = mode(gw.addr, &path, "typed");
        assert_eq!(r.status, 201, "{engine}");
        assert_eq!(r.headers["content-type"], "application/json", "{engine}");
        // OverrideError: forced even at 418, ResponseError as its body.
        let r = mode(gw.addr, &path, "override");
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (418, "short"),
            "{engine}"
        );
        assert_eq!(r.headers["server"], "tyk", "{engine}");
        let r = mode(gw.addr, &path, "empty");
        assert_eq!(r.status, 204, "{engine}");
        assert!(r.headers.get("content-type").is_none(), "{engine}");
        // A redirect to tyk:// is Tyk's internal loop, not implemented:
        // refused (500), never sent to the client.
        let r = mode(gw.addr, &path, "loop");
        assert_eq!(r.status, 500, "{engine}: {}", r.text());
        assert!(r.headers.get("location").is_none(), "{engine}");
    }
    assert_eq!(rec.count(), 0, "an overridden request reached the upstream");
    for engine in ENGINES {
        assert_eq!(mode(gw.addr, &format!("/{engine}/x"), "none").status, 200);
    }
    assert_eq!(rec.count(), 2);
    gw.stop();
}

/// Reports `spec.config_data` as Tyk's JSON would carry it.
const SPEC_JS: &str = r#"
var specMw = new TykJS.TykMiddleware.NewMiddleware({});
specMw.NewProcessRequest(function (request, session, spec) {
    request.SetHeaders["X-Has-Key"] = String("config_data" in spec);
    request.SetHeaders["X-Config"] = JSON.stringify(spec.config_data) || "undefined";
    request.SetHeaders["X-Spec"] = JSON.stringify(spec);
    return specMw.ReturnData(request, {});
});
"#;

#[test]
fn config_data_disabled_leaves_the_key_out_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let js = script(dir.path(), "spec.js", SPEC_JS);
    let cases = [
        ("shown", Some(json!({"foo": "bar"})), false),
        ("hidden", Some(json!({"foo": "bar"})), true),
        ("absent", None, false),
    ];
    for engine in ENGINES {
        for (name, config, disabled) in &cases {
            let id = format!("{name}-{engine}");
            let mw = json!({"pre": [{"name": "specMw", "path": js}]});
            let mut def = js_api(&id, &format!("http://{up}"), engine, mw);
            if let Some(c) = config {
                def["config_data"] = c.clone();
            }
            def["config_data_disabled"] = json!(disabled);
            write_api(dir.path(), &id, &def);
        }
    }
    let gw = start_gateway(dir.path());
    for engine in ENGINES {
        let seen = |name: &str| {
            assert_eq!(get(gw.addr, &format!("/{name}-{engine}/")).status, 200);
            let h = rec.last().headers;
            let v = |k: &str| h[k].to_str().unwrap().to_string();
            (v("x-has-key"), v("x-config"), v("x-spec"))
        };
        let (has, config, _) = seen("shown");
        assert_eq!(
            (has.as_str(), config.as_str()),
            ("true", r#"{"foo":"bar"}"#),
            "{engine}"
        );
        // Tyk's specToJson leaves the key out: `undefined`, not `null`.
        let (has, config, spec) = seen("hidden");
        assert_eq!(
            (has.as_str(), config.as_str()),
            ("false", "undefined"),
            "{engine}"
        );
        assert!(!spec.contains("bar"), "{engine}: {spec}");
        // No config_data at all: Go marshals the nil map as null.
        let (has, config, _) = seen("absent");
        assert_eq!(
            (has.as_str(), config.as_str()),
            ("true", "null"),
            "{engine}"
        );
    }
    gw.stop();
}

#[test]
fn config_data_disabled_hides_config_data_from_native_plugins() {
    let p = common::native::plugins();
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    for (name, disabled) in [("nshown", false), ("nhidden", true)] {
        let mut def = common::native::native_api(
            name,
            &format!("/{name}/"),
            &up.to_string(),
            &[(&p.test, "ApiInfo")],
            &[],
        );
        def["config_data"] = json!({"secret": "s3"});
        def["config_data_disabled"] = json!(disabled);
        write_api(dir.path(), name, &def);
    }
    let gw = start_gateway(dir.path());
    assert_eq!(get(gw.addr, "/nshown/").status, 200);
    assert_eq!(rec.last().headers["x-config"], r#"{"secret":"s3"}"#);
    assert_eq!(get(gw.addr, "/nhidden/").status, 200);
    assert_eq!(rec.last().headers["x-config"], "{}");
    gw.stop();
}
