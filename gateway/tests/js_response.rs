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
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            loop {
                let (s, _) = l.accept().await.unwrap();
                let body = body.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let body = body.clone();
                        async move {
                            let _ = req.into_body().collect().await;
                            let mut resp = Response::new(Full::new(body));
                            resp.headers_mut()
                                .insert("x-upstream", "big".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                        .await;
                });
            }
        });
    });
    addr
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
    // Exactly the limit is served, rewritten.
    let dir = tempfile::tempdir().unwrap();
    let gw = serve(dir.path(), upstream_with(Bytes::from(vec![b'a'; limit])));
    let r = mode(gw.addr, "/boa/", "body");
    assert_eq!(r.body.len(), limit + "custom:".len());
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
