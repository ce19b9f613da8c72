//! Response middleware (`custom_middleware.response`) on both JS engines,
//! through the real gateway and upstreams: Tyk master's
//! `NewProcessResponse(function (response, request, session, spec))` and
//! `ReturnResponseData(response, session)`, changing status, headers and
//! body; failures answered `500 Middleware error`; the buffer's bound.

mod common;
mod js_phases;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use js_phases::*;
use serde_json::json;

/// The response hook of Tyk's own tests, all of them in one: header
/// injection, body rewrite, status change, header deletion, chosen by the
/// request's `X-Mode` header, which it reads from the `request` it gets.
const RESPONSE_JS: &str = r#"
var respHook = new TykJS.TykMiddleware.NewMiddleware({});
respHook.NewProcessResponse(function (response, request, session, spec) {
    var mode = (request.Headers["X-Mode"] || ["none"])[0];
    response.SetHeaders["X-Response-Modified"] = "true";
    response.SetHeaders["X-Seen"] = [response.StatusCode, response.Headers["X-Upstream"][0],
        request.Method, request.URL, String(request.Body), spec.APIID].join(" ");
    if (mode === "body") {
        response.Body = "custom:" + response.Body;
    } else if (mode === "status") {
        response.StatusCode = 201;
    } else if (mode === "delete") {
        response.DeleteHeaders.push("X-Upstream");
    } else if (mode === "headers-edit") {
        response.Headers["X-Upstream"] = ["ignored"];
    } else if (mode === "throw") {
        throw new Error("deliberate");
    } else if (mode === "bare") {
        return response;
    } else if (mode === "bad-status") {
        response.StatusCode = "201";
    } else if (mode === "interim-status") {
        response.StatusCode = 100;
    } else if (mode === "array") {
        return respHook.ReturnResponseData([response.StatusCode, response.Body], {});
    } else if (mode === "recurse") {
        var answer = respHook.ReturnResponseData(response, {});
        Object.defineProperty(answer, "Response", {
            get: function () { return this.Response; }, enumerable: true
        });
        return answer;
    }
    return respHook.ReturnResponseData(response, {});
});
"#;

fn serve(dir: &std::path::Path, target: SocketAddr) -> TestGateway {
    let js = script(dir, "resp.js", RESPONSE_JS);
    for engine in ENGINES {
        let mw = json!({"response": [{"name": "respHook", "path": js}]});
        let def = js_api(engine, &format!("http://{target}"), engine, mw);
        write_api(dir, engine, &def);
    }
    start_gateway(dir)
}

fn mode(addr: SocketAddr, path: &str, m: &str) -> Got {
    send(addr, "GET", path, &[("x-mode", m)], b"")
}

/// An answer the host cannot use fails its own request and nothing more:
/// a 1xx status (it would be written as the final answer), a getter
/// that recurses while the host reads it (on boa that hits a runtime limit
/// outside the script's run; the context is rebuilt, where it used to fail
/// every later request of the API), and an array as `Response`, which Go's
/// decoder refuses for Tyk's struct (it was read as an object without
/// fields: the upstream's status with an empty body, a 200).
#[test]
fn unusable_response_answers_fail_only_their_own_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _rec) = recorder();
    let gw = serve(dir.path(), up);
    for engine in ENGINES {
        let path = format!("/{engine}/x");
        for m in ["interim-status", "recurse", "array"] {
            for i in 0..25 {
                let r = mode(gw.addr, &path, m);
                assert_eq!(r.status, 500, "{engine} {m} #{i}: {}", r.text());
                assert_eq!(
                    r.json(),
                    json!({ "error": "Middleware error" }),
                    "{engine} {m}"
                );
            }
            let r = mode(gw.addr, &path, "none");
            assert_eq!(r.status, 200, "{engine} after {m}: {}", r.text());
            assert_eq!(
                r.headers["x-response-modified"], "true",
                "{engine} after {m}"
            );
        }
    }
    gw.stop();
}

#[test]
fn response_hooks_change_status_headers_and_body_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let gw = serve(dir.path(), up);
    for engine in ENGINES {
        let path = format!("/{engine}/x?q=1");
        let r = mode(gw.addr, &path, "none");
        assert_eq!(
            (r.status.as_u16(), r.text().as_str()),
            (200, "recorded"),
            "{engine}"
        );
        assert_eq!(r.headers["x-response-modified"], "true", "{engine}");
        // The request is the one that went upstream; its Body is null, as
        // Tyk hands response hooks none.
        assert_eq!(
            r.headers["x-seen"],
            format!("200 recorder GET /{engine}/x?q=1 null {engine}"),
            "{engine}"
        );
        assert_eq!(r.headers["x-upstream"], "recorder", "{engine}");
        let r = mode(gw.addr, &path, "body");
        assert_eq!(r.text(), "custom:recorded", "{engine}");
        assert_eq!(r.headers["content-length"], "15", "{engine}");
        let r = mode(gw.addr, &path, "status");
        assert_eq!(r.status, 201, "{engine}");
        let r = mode(gw.addr, &path, "delete");
        assert!(r.headers.get("x-upstream").is_none(), "{engine}");
        // As in Tyk, only SetHeaders and DeleteHeaders apply.
        let r = mode(gw.addr, &path, "headers-edit");
        assert_eq!(r.headers["x-upstream"], "recorder", "{engine}");
    }
    assert_eq!(rec.count(), 10);
    gw.stop();
}

fn assert_middleware_error(r: &Got, what: &str) {
    assert_eq!(r.status, 500, "{what}: {}", r.text());
    assert_eq!(
        r.text(),
        "{\n    \"error\": \"Middleware error\"\n}",
        "{what}"
    );
    assert_eq!(r.headers["x-generator"], "tyk.io", "{what}");
}

#[test]
fn failing_hooks_answer_tyks_500_and_the_next_request_works() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _rec) = recorder();
    let gw = serve(dir.path(), up);
    for engine in ENGINES {
        let path = format!("/{engine}/");
        for m in ["throw", "bare", "bad-status"] {
            assert_middleware_error(&mode(gw.addr, &path, m), &format!("{engine} {m}"));
        }
        // Many throws in a row leave the engine serving.
        for _ in 0..300 {
            assert_eq!(mode(gw.addr, &path, "throw").status, 500);
        }
        assert_eq!(
            mode(gw.addr, &path, "body").text(),
            "custom:recorded",
            "{engine}"
        );
    }
    gw.stop();
}

/// An upstream answering every request with `body`.
fn upstream_with(body: Bytes) -> SocketAddr {
    upstream_fn(move |req: Request<Incoming>| {
        let body = body.clone();
        async move {
            let _ = req.into_body().collect().await;
            let mut resp = Response::new(Full::new(body));
            resp.headers_mut()
                .insert("x-upstream", "big".parse().unwrap());
            Ok::<_, std::convert::Infallible>(resp)
        }
    })
}

#[test]
fn bodies_are_bytes_and_the_buffer_is_bounded() {
    // Not UTF-8, and untouched by the script: it reaches the client as is.
    let binary = Bytes::from_static(b"\xff\xfe binary \x00 body");
    let dir = tempfile::tempdir().unwrap();
    let gw = serve(dir.path(), upstream_with(binary.clone()));
    for engine in ENGINES {
        let r = mode(gw.addr, &format!("/{engine}/"), "none");
        assert_eq!(r.body, binary, "{engine}");
        assert_eq!(r.headers["x-response-modified"], "true");
    }
    gw.stop();

    // One byte past the 32 MiB buffered for response middleware: Tyk's
    // 500 for a body the hook cannot read, never a truncated answer.
    let limit = gateway::response::MAX_BUFFERED_RESPONSE;
    let big = Bytes::from(vec![b'a'; limit + 1]);
    let dir = tempfile::tempdir().unwrap();
    let gw = serve(dir.path(), upstream_with(big));
    for engine in ENGINES {
        assert_middleware_error(&mode(gw.addr, &format!("/{engine}/"), "none"), engine);
    }
    gw.stop();
    // Exactly the limit is read by the hook and served. Rewritten to
    // "custom:" and the body, it is past the same bound on a body a
    // script hands the host (`js_bodies.rs`): Tyk's 500 for a failed hook.
    let dir = tempfile::tempdir().unwrap();
    let gw = serve(dir.path(), upstream_with(Bytes::from(vec![b'a'; limit])));
    for engine in ENGINES {
        let path = format!("/{engine}/");
        let r = mode(gw.addr, &path, "none");
        assert_eq!(r.status, 200, "{engine}");
        assert_eq!(r.body.len(), limit, "{engine}");
        assert_eq!(r.headers["x-response-modified"], "true", "{engine}");
        assert_middleware_error(&mode(gw.addr, &path, "body"), engine);
    }
    gw.stop();
}

#[test]
fn a_response_entry_without_process_response_fails_its_api_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let js = script(dir.path(), "none.js", "var nothing = 1;");
    for engine in ENGINES {
        let mw = json!({"response": [{"name": "missingHook", "path": js}]});
        write_api(
            dir.path(),
            engine,
            &js_api(engine, &format!("http://{up}"), engine, mw),
        );
    }
    let gw = start_gateway(dir.path());
    for engine in ENGINES {
        let e = gw
            .load_errors
            .iter()
            .find(|e| e.file.ends_with(format!("{engine}.json")))
            .unwrap_or_else(|| panic!("{engine}: no load error: {:?}", gw.load_errors));
        assert_eq!(e.field, "custom_middleware.response[0].name", "{e}");
        assert!(e.message.contains("missingHook"), "{e}");
        assert_eq!(get(gw.addr, &format!("/{engine}/")).status, 500);
    }
    assert_eq!(rec.count(), 0, "a failing-closed API reached its upstream");
    gw.stop();
}

/// Answers itself when the request's `X-Answer` names this hook: a forced
/// 200, or (`<hook>-error`) a 403 error answer.
fn answering_hook(hook: &str) -> String {
    format!(
        r#"var {hook}Hook = new TykJS.TykMiddleware.NewMiddleware({{}});
{hook}Hook.NewProcessRequest(function (request, session, spec) {{
    var want = (request.Headers["X-Answer"] || [""])[0];
    if (want === "{hook}") {{
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = "forced by {hook}";
    }} else if (want === "{hook}-error") {{
        request.ReturnOverrides.ResponseCode = 403;
        request.ReturnOverrides.ResponseError = "refused by {hook}";
    }}
    return {hook}Hook.ReturnData(request, {{}});
}});
"#
    )
}

/// Tyk's `forceResponse` runs the response chain unless the hook is a
/// `pre` one (`isPre`); a `ReturnOverrides` error (>= 400 without
/// `OverrideError`) is Tyk's error handler, which runs none.
#[test]
fn a_post_hooks_forced_answer_passes_the_response_chain_as_in_tyk() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let pre = script(dir.path(), "pre.js", &answering_hook("pre"));
    let post = script(dir.path(), "post.js", &answering_hook("post"));
    let stamp = script(
        dir.path(),
        "stamp.js",
        r#"var stamp = new TykJS.TykMiddleware.NewMiddleware({});
stamp.NewProcessResponse(function (response, request, session, spec) {
    response.SetHeaders["X-Stamped"] = String(response.StatusCode);
    response.Body = "stamped:" + response.Body;
    return stamp.ReturnResponseData(response, {});
});"#,
    );
    for engine in ENGINES {
        let mw = json!({
            "pre": [{"name": "preHook", "path": pre}],
            "post": [{"name": "postHook", "path": post}],
            "response": [{"name": "stamp", "path": stamp}]
        });
        let def = js_api(engine, &format!("http://{up}"), engine, mw);
        write_api(dir.path(), engine, &def);
    }
    let gw = start_gateway(dir.path());
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    for engine in ENGINES {
        let ask = |answer: &str| {
            send(
                gw.addr,
                "GET",
                &format!("/{engine}/x"),
                &[("x-answer", answer)],
                b"",
            )
        };
        let r = ask("post");
        assert_eq!(r.status, 200, "{engine}");
        assert_eq!(r.text(), "stamped:forced by post", "{engine}");
        assert_eq!(r.headers["x-stamped"], "200", "{engine}");
        assert_eq!(r.headers["server"], "tyk", "{engine}");
        let r = ask("pre");
        assert_eq!(r.text(), "forced by pre", "{engine}: pre is not chained");
        assert!(r.headers.get("x-stamped").is_none(), "{engine}");
        for hook in ["pre", "post"] {
            let r = ask(&format!("{hook}-error"));
            assert_eq!(r.status, 403, "{engine} {hook}");
            assert!(r.text().contains(&format!("refused by {hook}")), "{engine}");
            assert!(r.headers.get("x-stamped").is_none(), "{engine} {hook}");
        }
        let r = ask("");
        assert_eq!(r.text(), "stamped:recorded", "{engine}");
    }
    assert_eq!(rec.count(), 2, "only the unanswered requests were proxied");
    gw.stop();
}

/// `response.Headers` is built on first read on both engines: what a
/// script sees must be what a plain data property holding Tyk's decoded
/// headers would give, whatever it does to the field or the object.
const HEADERS_JS: &str = r#"
var kept = null;
var hdrHook = new TykJS.TykMiddleware.NewMiddleware({});
hdrHook.NewProcessResponse(function (response, request, session, spec) {
    var mode = (request.Headers["X-Mode"] || ["none"])[0];
    var out = {};
    if (mode === "probe") {
        out.keys = Object.keys(response);
        out.has = "Headers" in response;
        out.enumerated = [];
        for (var k in response) { out.enumerated.push(k); }
        out.multi = response.Headers["X-Multi"];
        out.same = response.Headers === response.Headers;
        response.Headers["X-Added"] = ["mine"];
        out.added = response.Headers["X-Added"];
        var child = Object.create(response);
        out.inherited = child.Headers["X-Upstream"];
        child.Headers = {"X-Child": ["c"]};
        out.childOwn = Object.prototype.hasOwnProperty.call(child, "Headers");
        out.childSees = child.Headers;
        out.parentAfterChild = response.Headers["X-Upstream"];
        var copy = JSON.parse(JSON.stringify(response));
        out.jsonKeys = Object.keys(copy);
        out.jsonHeaders = [copy.Headers["X-Upstream"], copy.Headers["X-Added"]];
        out.spread = Object.assign({}, response).Headers["X-Mode-Seen"];
        response.Headers = {"X-Replaced": ["r"]};
        out.replaced = response.Headers;
        delete response.Headers;
        out.deleted = [response.Headers === undefined, "Headers" in response];
        response.Headers = 7;
        out.readded = [response.Headers, Object.keys(response).pop()];
    } else if (mode === "unread") {
        // Never read: the host must not need it.
        response.SetHeaders["X-Unread"] = "yes";
    } else if (mode === "keep") {
        kept = response;
    } else if (mode === "kept") {
        // The kept response still shows its own call's headers.
        out.kept = kept === null ? null : kept.Headers["X-Mode-Seen"];
        out.now = response.Headers["X-Mode-Seen"];
    } else if (mode === "frozen") {
        Object.freeze(response);
        out.frozen = response.Headers["X-Upstream"];
        response.Headers = {"X-Ignored": ["i"]};
        out.after = response.Headers["X-Upstream"];
        return hdrHook.ReturnResponseData({
            StatusCode: 200, Body: JSON.stringify(out), SetHeaders: {}, DeleteHeaders: []
        }, {});
    }
    response.Body = JSON.stringify(out);
    return hdrHook.ReturnResponseData(response, {});
});
"#;

/// An upstream answering `ok` with `X-Upstream: hdr`, two `X-Multi`
/// values and the request's `X-Mode` as `X-Mode-Seen`.
fn upstream_with_headers() -> SocketAddr {
    upstream_fn(|req: Request<Incoming>| async move {
        let seen = req.headers().get("x-mode").cloned();
        let _ = req.into_body().collect().await;
        let mut resp = Response::new(Full::new(Bytes::from_static(b"ok")));
        let h = resp.headers_mut();
        h.insert("x-upstream", "hdr".parse().unwrap());
        h.append("x-multi", "a".parse().unwrap());
        h.append("x-multi", "b".parse().unwrap());
        if let Some(v) = seen {
            h.insert("x-mode-seen", v);
        }
        Ok::<_, std::convert::Infallible>(resp)
    })
}

#[test]
fn response_headers_built_on_first_read_behave_as_a_data_property() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream_with_headers();
    let js = script(dir.path(), "hdr.js", HEADERS_JS);
    let strategies = ["persistent", "tyk-json", "fresh"];
    for engine in ENGINES {
        for strategy in strategies {
            let mw = json!({"response": [{"name": "hdrHook", "path": js}], "strategy": strategy});
            let id = format!("{engine}-{strategy}");
            write_api(
                dir.path(),
                &id,
                &js_api(&id, &format!("http://{up}"), engine, mw),
            );
        }
    }
    // One worker: the kept response below is in its one context.
    let gw = start_gateway_with(gateway::server::GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..Default::default()
    });
    let body = |path: &str, m: &str| -> serde_json::Value {
        let r = mode(gw.addr, path, m);
        assert_eq!(r.status, 200, "{path} {m}: {}", r.text());
        serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{path} {m}: {e}: {}", r.text()))
    };
    let fields = json!([
        "StatusCode",
        "Body",
        "Headers",
        "SetHeaders",
        "DeleteHeaders"
    ]);
    for engine in ENGINES {
        for strategy in strategies {
            let path = format!("/{engine}-{strategy}/");
            let what = format!("{engine} {strategy}");
            // Twice: the second call's object must behave as the first's.
            for _ in 0..2 {
                let p = body(&path, "probe");
                assert_eq!(p["keys"], fields, "{what}");
                assert_eq!(p["enumerated"], fields, "{what}");
                assert_eq!(p["has"], true, "{what}");
                assert_eq!(p["multi"], json!(["a", "b"]), "{what}");
                assert_eq!(p["same"], true, "{what}");
                assert_eq!(p["added"], json!(["mine"]), "{what}");
                assert_eq!(p["inherited"], json!(["hdr"]), "{what}");
                assert_eq!(p["childOwn"], true, "{what}");
                assert_eq!(p["childSees"], json!({"X-Child": ["c"]}), "{what}");
                assert_eq!(p["parentAfterChild"], json!(["hdr"]), "{what}");
                assert_eq!(p["jsonKeys"], fields, "{what}");
                assert_eq!(p["jsonHeaders"], json!([["hdr"], ["mine"]]), "{what}");
                assert_eq!(p["spread"], json!(["probe"]), "{what}");
                assert_eq!(p["replaced"], json!({"X-Replaced": ["r"]}), "{what}");
                assert_eq!(p["deleted"], json!([true, false]), "{what}");
                assert_eq!(p["readded"], json!([7, "Headers"]), "{what}");
            }
            let r = mode(gw.addr, &path, "unread");
            assert_eq!(
                (r.status.as_u16(), r.headers["x-unread"].to_str().unwrap()),
                (200, "yes"),
                "{what}"
            );
            // Headers only SetHeaders/DeleteHeaders change: untouched.
            assert_eq!(r.headers["x-upstream"], "hdr", "{what}");
            let f = body(&path, "frozen");
            assert_eq!(f, json!({"frozen": ["hdr"], "after": ["hdr"]}), "{what}");
        }
        // State persists only under `persistent`: a kept response is a
        // snapshot of its own call.
        let path = format!("/{engine}-persistent/");
        body(&path, "keep");
        assert_eq!(
            body(&path, "kept"),
            json!({"kept": ["keep"], "now": ["kept"]}),
            "{engine}"
        );
    }
    gw.stop();
}
