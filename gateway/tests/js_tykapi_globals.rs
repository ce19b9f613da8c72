//! Tyk's `TykMakeHttpRequest` through the real gateway on both engines,
//! against real local servers (a recorder, a slow one): Tyk's JSON answer,
//! form data, failures that answer `undefined`, the refusal to block an
//! I/O thread, and the stall test (a waiting script holds up no other
//! request). Also the script environment around the globals: each file's
//! own scope, and bodies as bytes. Nothing asserts a timing.

mod common;
mod js_tykapi;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};

use common::*;
use js_tykapi::*;

#[test]
fn make_http_request_calls_out_and_answers_tyks_json() {
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        make_http_request_calls_out_and_answers_tyks_json_on(engine);
    }
}

fn make_http_request_calls_out_and_answers_tyks_json_on(engine: &str) {
    let (svc, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let script = answering(
        r#"return TykMakeHttpRequest(JSON.stringify({
            Method: "POST", Domain: spec.config_data.svc, Resource: "/check?x=1",
            Headers: {"X-Test": "1", "Content-Type": "text/plain"}, Body: "hello"}));"#,
    );
    js_api(
        dir.path(),
        "call",
        "/call/",
        svc,
        engine,
        &script,
        json!({"svc": format!("http://{svc}")}),
    );
    let gw = gateway(dir.path(), 1, 1);

    let got = get(gw.addr, "/call/");
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let seen = rec.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/check?x=1");
    assert_eq!(seen.headers["x-test"], "1");
    assert_eq!(seen.headers["connection"], "close", "Tyk sets r.Close");
    assert_eq!(seen.headers["user-agent"], "Go-http-client/1.1");
    assert_eq!(&seen.body[..], b"hello");
    // Tyk's TykJSHttpResponse: Code, Body, Headers, then the lower-case
    // copies, in that order (the text as the script received it).
    let text = got.text();
    let order: Vec<usize> = [
        "\"Code\"",
        "\"Body\"",
        "\"Headers\"",
        "\"code\"",
        "\"body\"",
        "\"headers\"",
    ]
    .iter()
    .map(|k| {
        text.find(k)
            .unwrap_or_else(|| panic!("{k} missing in {text}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    let v = got.json();
    assert_eq!(v["Code"], 200);
    assert_eq!(v["code"], 200);
    assert_eq!(v["Body"], "recorded");
    assert_eq!(v["Headers"]["X-Upstream"], json!(["recorder"]));
    assert_eq!(v["headers"], v["Headers"]);
    gw.stop();
}

#[test]
fn make_http_request_sends_form_data_and_follows_go_field_rules() {
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        make_http_request_sends_form_data_and_follows_go_field_rules_on(engine);
    }
}

fn make_http_request_sends_form_data_and_follows_go_field_rules_on(engine: &str) {
    let (svc, rec) = recorder();
    let dir = tempfile::tempdir().unwrap();
    // Lower-case field names: Go's decoder matches them case-insensitively.
    let script = answering(
        r#"var r = JSON.parse(TykMakeHttpRequest(JSON.stringify({
            method: "POST", domain: spec.config_data.svc, resource: "/form",
            FormData: {"b": "2 3", "a": "1"}})));
            return {code: r.code};"#,
    );
    js_api(
        dir.path(),
        "form",
        "/form/",
        svc,
        engine,
        &script,
        json!({"svc": format!("http://{svc}")}),
    );
    let gw = gateway(dir.path(), 1, 1);
    let got = get(gw.addr, "/form/");
    assert_eq!(got.json(), json!({"code": 200}));
    let seen = rec.last();
    assert_eq!(seen.uri, "/form");
    assert_eq!(
        &seen.body[..],
        b"a=1&b=2+3",
        "keys sorted, as url.Values.Encode"
    );
    gw.stop();
}

#[test]
fn make_http_request_failures_answer_undefined_and_the_request_goes_on() {
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        make_http_request_failures_answer_undefined_and_the_request_goes_on_on(engine);
    }
}

fn make_http_request_failures_answer_undefined_and_the_request_goes_on_on(engine: &str) {
    let (svc, rec) = recorder();
    let dead = dead_addr();
    let dir = tempfile::tempdir().unwrap();
    let script = answering(&format!(
        r#"return [
            typeof TykMakeHttpRequest(),
            typeof TykMakeHttpRequest("{{not json"),
            typeof TykMakeHttpRequest(JSON.stringify({{Method: "GET"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Method: 5, Domain: "http://{svc}"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "http://{dead}", Resource: "/"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "https://{svc}", Resource: "/"}})),
            typeof TykMakeHttpRequest(JSON.stringify({{Domain: "/relative"}}))
        ];"#
    ));
    js_api(
        dir.path(),
        "fails",
        "/fails/",
        svc,
        engine,
        &script,
        Value::Null,
    );
    let gw = gateway(dir.path(), 1, 1);
    let got = get(gw.addr, "/fails/");
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(got.json(), json!(vec!["undefined"; 7]));
    // The https attempt reached the server as a plain connection at most;
    // no request was recorded from any of them.
    assert_eq!(rec.count(), 0);
    // A script that then parses the missing answer fails its own request.
    let dir2 = tempfile::tempdir().unwrap();
    let parse = answering(&format!(
        r#"return JSON.parse(TykMakeHttpRequest(JSON.stringify({{Domain: "http://{dead}"}})));"#
    ));
    js_api(
        dir2.path(),
        "parse",
        "/parse/",
        svc,
        engine,
        &parse,
        Value::Null,
    );
    let gw2 = gateway(dir2.path(), 1, 1);
    assert_eq!(
        get(gw2.addr, "/parse/").status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    gw.stop();
    gw2.stop();
}

#[test]
fn inline_scripts_refuse_to_block_the_io_thread() {
    for engine in ENGINES {
        let (svc, rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        let script = answering(
            r#"return [typeof TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/"})),
                       typeof TykBatchRequest(JSON.stringify({requests: [{method: "GET", relative_url: spec.config_data.svc + "/"}]}))];"#,
        );
        js_api(
            dir.path(),
            "inline",
            "/inline/",
            svc,
            engine,
            &script,
            json!({"svc": format!("http://{svc}")}),
        );
        let gw = gateway(dir.path(), 1, 0);
        let got = get(gw.addr, "/inline/");
        assert_eq!(got.json(), json!(["undefined", "undefined"]), "{engine}");
        assert_eq!(
            rec.count(),
            0,
            "{engine}: nothing may be sent from an I/O thread"
        );
        gw.stop();
    }
}

/// The issue's stall test: with one I/O thread, while a script waits on a
/// slow service, `/plain/` and another JS API are answered before it ends.
#[test]
fn a_waiting_script_does_not_stall_other_requests() {
    for engine in ENGINES {
        // Shown with a failure's output: which engine failed.
        eprintln!("engine: {engine}");
        a_waiting_script_does_not_stall_other_requests_on(engine);
    }
}

fn a_waiting_script_does_not_stall_other_requests_on(engine: &str) {
    let slow_delay = Duration::from_secs(2);
    let (slow, slow_rec) = recorder_with_delay(slow_delay);
    let up = mock();
    let dir = tempfile::tempdir().unwrap();
    let waits = answering(
        r#"var r = JSON.parse(TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/slow"})));
           return {code: r.Code};"#,
    );
    js_api(
        dir.path(),
        "waits",
        "/waits/",
        up,
        engine,
        &waits,
        json!({"svc": format!("http://{slow}")}),
    );
    js_api(
        dir.path(),
        "quick",
        "/quick/",
        up,
        engine,
        &answering("return {quick: true};"),
        Value::Null,
    );
    write_api(
        dir.path(),
        "plain",
        &api_json(
            "plain",
            "/plain/",
            &format!("http://{up}"),
            true,
            Value::Null,
        ),
    );
    let gw = gateway(dir.path(), 1, 1);
    let addr = gw.addr;

    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let waiter = std::thread::spawn(move || {
        let got = get(addr, "/waits/");
        d.store(true, Ordering::SeqCst);
        got
    });
    // Until the slow service holds the script's call (bounded: 20 s).
    for _ in 0..2000 {
        if slow_rec.count() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        slow_rec.count(),
        1,
        "the script never called the slow service"
    );
    assert_eq!(get(addr, "/plain/hello").status, StatusCode::OK);
    assert_eq!(get(addr, "/quick/").json(), json!({"quick": true}));
    assert!(
        !done.load(Ordering::SeqCst),
        "the other requests were answered only after the waiting script ended"
    );
    let got = waiter.join().unwrap();
    assert_eq!(got.json(), json!({"code": 200}));
    gw.stop();
}

/// A pre and a post file that both declare `var handler` (and both entries
/// are named `handler`) each run their own.
/// A call out held until `--jsvm-timeout` gives the script `undefined`
/// at the deadline, and the script, which may well end before the
/// interpreter looks at the clock again, must not have its answer used:
/// the request fails as a timeout (Tyk answers 500 at its JSVM timeout,
/// as the README says). It was applied: a 200 (or the request proxied)
/// just after the deadline, on every engine and strategy. The thread,
/// which did answer, serves the next request.
#[test]
fn a_call_out_held_to_the_deadline_fails_the_request() {
    // Takes each request and answers only after the test is over.
    let (hangs, hang_rec) = recorder_with_delay(Duration::from_secs(3600));
    let (up, rec) = recorder();
    let script = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request, session, spec) {
    if (request.URL.indexOf("hang") >= 0) {
        var r = TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/hang"}));
        request.ReturnOverrides.ResponseCode = 200;
        request.ReturnOverrides.ResponseBody = "went on with " + typeof r;
    }
    return mw.ReturnData(request, {});
});
"#;
    let mut calls = 0;
    for engine in ENGINES {
        for strategy in ["persistent", "tyk-json", "fresh"] {
            let combo = format!("{engine} {strategy}");
            let dir = tempfile::tempdir().unwrap();
            js_api(
                dir.path(),
                "calls",
                "/calls/",
                up,
                engine,
                script,
                json!({"svc": format!("http://{hangs}")}),
            );
            let gw = gateway_with(one_vm_thread(
                dir.path(),
                Duration::from_millis(300),
                Some(strategy),
            ));
            let got = get(gw.addr, "/calls/hang");
            calls += 1;
            assert_eq!(hang_rec.count(), calls, "{combo}: the call never went out");
            assert_eq!(
                got.status,
                StatusCode::INTERNAL_SERVER_ERROR,
                "{combo}: {}",
                got.text()
            );
            assert_eq!(
                got.json(),
                json!({"error": "Internal Server Error"}),
                "{combo}"
            );
            // The next request works, on the same thread.
            let before = rec.count();
            let got = get(gw.addr, "/calls/next");
            assert_eq!(got.status, StatusCode::OK, "{combo}: {}", got.text());
            assert_eq!(rec.count(), before + 1, "{combo}");
            gw.stop();
        }
    }
}

/// Top-level code runs under `--jsvm-timeout` when a context is built, and
/// so do its call outs. They had 5 s of their own: a script whose
/// top-level `TykMakeHttpRequest` waited on a silent service passed the
/// load's check (the call returned, and the code ended before the budget
/// looked at the clock), and then every VM thread spent 5 s building its
/// context while each request timed out and abandoned it for a new one:
/// the API never served, and threads churned. Now the build stops at the
/// timeout, and the API fails closed at load, naming the file.
#[test]
fn a_top_level_call_out_is_bounded_by_the_jsvm_timeout() {
    let (hangs, hang_rec) = recorder_with_delay(Duration::from_secs(3600));
    let (up, rec) = recorder();
    let script = r#"var boot = TykMakeHttpRequest(JSON.stringify({Domain: "http://HANGS", Resource: "/boot"}));
var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request, session, spec) {
    return mw.ReturnData(request, {});
});
"#
    .replace("HANGS", &hangs.to_string());
    for engine in ENGINES {
        for strategy in ["persistent", "fresh"] {
            let combo = format!("{engine} {strategy}");
            let dir = tempfile::tempdir().unwrap();
            js_api(
                dir.path(),
                "boot",
                "/boot/",
                up,
                engine,
                &script,
                Value::Null,
            );
            let before = hang_rec.count();
            let gw = gateway_loading(one_vm_thread(
                dir.path(),
                Duration::from_millis(300),
                Some(strategy),
            ));
            assert!(
                hang_rec.count() > before,
                "{combo}: the call never went out"
            );
            let errors = format!("{:?}", gw.load_errors);
            assert!(
                errors.contains("top-level code was stopped"),
                "{combo}: {errors}"
            );
            let got = get(gw.addr, "/boot/");
            assert_eq!(got.status, StatusCode::INTERNAL_SERVER_ERROR, "{combo}");
            assert_eq!(rec.count(), 0, "{combo}: proxied");
            gw.stop();
        }
    }
}

/// As Go's client, a script's credentials (`Authorization`, `Cookie`)
/// follow a redirect only to the host it called or a subdomain of it; the
/// other headers follow anywhere. They were sent to wherever a redirect
/// pointed (`127.0.0.1` -> `localhost` here, two hosts to Go).
#[test]
fn credentials_do_not_follow_a_redirect_to_another_host() {
    let (landing, rec) = recorder();
    let elsewhere = format!("http://localhost:{}/landed", landing.port());
    let same = format!("http://127.0.0.1:{}/same", landing.port());
    let redirect = upstream_fn(move |req: http::Request<hyper::body::Incoming>| {
        let to = if req.uri().path() == "/away" {
            elsewhere.clone()
        } else {
            same.clone()
        };
        async move {
            let mut resp = http::Response::new(http_body_util::Full::new(bytes::Bytes::new()));
            *resp.status_mut() = StatusCode::FOUND;
            resp.headers_mut().insert("location", to.parse().unwrap());
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    let script = answering(
        r#"var codes = [];
           ["/away", "/near"].forEach(function (path) {
               var r = TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: path,
                   Headers: {"Authorization": "Bearer secret", "Cookie": "s=1", "X-Other": "kept"}}));
               codes.push(r ? JSON.parse(r).Code : 0);
           });
           return codes;"#,
    );
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "redir",
            "/redir/",
            landing,
            engine,
            &script,
            json!({"svc": format!("http://{redirect}")}),
        );
        let gw = gateway(dir.path(), 1, 1);
        let before = rec.count();
        assert_eq!(
            get(gw.addr, "/redir/").json(),
            json!([200, 200]),
            "{engine}"
        );
        let seen = rec.requests();
        let [away, near] = &seen[before..] else {
            panic!("{engine}: {} requests landed", seen.len() - before)
        };
        assert_eq!(away.uri, "/landed", "{engine}");
        assert!(
            away.headers.get("authorization").is_none(),
            "{engine}: {:?}",
            away.headers
        );
        assert!(away.headers.get("cookie").is_none(), "{engine}");
        assert_eq!(away.headers["x-other"], "kept", "{engine}");
        assert_eq!(near.uri, "/same", "{engine}");
        assert_eq!(near.headers["authorization"], "Bearer secret", "{engine}");
        assert_eq!(near.headers["cookie"], "s=1", "{engine}");
        gw.stop();
    }
}

/// As Go's client, a call takes at most five interim (1xx) answers before
/// the final one: past that it fails (`undefined`). hyper's client skipped
/// them without end, so a service sending them forever held the call, its
/// VM thread parsing, until `--jsvm-timeout`.
#[test]
fn a_call_out_takes_at_most_five_interim_answers() {
    use std::io::Write;
    // `/N` answers N interim heads, then 200; `/endless` never stops.
    let (svc, _) = common::raw::raw_upstream(|mut s| {
        let Some(head) = common::raw::read_request(&mut s) else {
            return;
        };
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let count = path[1..].parse::<usize>().unwrap_or(usize::MAX);
        for _ in 0..count.min(1_000_000) {
            if s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                return;
            }
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    });
    let script = answering(
        r#"return ["/5", "/6", "/endless"].map(function (path) {
               var r = TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: path}));
               return r ? JSON.parse(r).Code : typeof r;
           });"#,
    );
    let (up, _rec) = recorder();
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "interim",
            "/interim/",
            up,
            engine,
            &script,
            json!({"svc": format!("http://{svc}")}),
        );
        let gw = gateway_with(one_vm_thread(dir.path(), Duration::from_secs(60), None));
        let got = get(gw.addr, "/interim/");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        assert_eq!(
            got.json(),
            json!([200, "undefined", "undefined"]),
            "{engine}"
        );
        gw.stop();
    }
}

#[test]
fn each_file_has_its_own_scope() {
    let hook = |header: &str| {
        format!(
            r#"var handler = new TykJS.TykMiddleware.NewMiddleware({{}});
var shared = "{header}";
handler.NewProcessRequest(function (request, session, spec) {{
    request.SetHeaders["{header}"] = shared;
    return handler.ReturnData(request, {{}});
}});
"#
        )
    };
    for engine in ENGINES {
        let up = mock();
        let dir = tempfile::tempdir().unwrap();
        let (pre, post) = (dir.path().join("pre.js"), dir.path().join("post.js"));
        std::fs::write(&pre, hook("X-Pre")).unwrap();
        std::fs::write(&post, hook("X-Post")).unwrap();
        let api = api_json(
            "scoped",
            "/scoped/",
            &format!("http://{up}"),
            true,
            json!({
                "driver": "otto",
                "engine": engine,
                "pre": [{"name": "handler", "path": pre.to_str().unwrap()}],
                "post": [{"name": "handler", "path": post.to_str().unwrap()}]
            }),
        );
        write_api(dir.path(), "scoped", &api);
        let gw = gateway(dir.path(), 1, 1);
        let got = get(gw.addr, "/scoped/x");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let echo = got.json();
        assert_eq!(echo["headers"]["X-Pre"], "X-Pre", "{engine}: {echo}");
        assert_eq!(echo["headers"]["X-Post"], "X-Post", "{engine}: {echo}");
        gw.stop();
    }
}

#[test]
fn an_untouched_body_reaches_the_upstream_byte_for_byte() {
    let body: Vec<u8> = vec![b'a', 0xff, 0x00, 0xfe, b'z', 0xc3];
    let header_only = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request) {
    request.SetHeaders["X-Seen-Length"] = String(request.Body.length);
    return mw.ReturnData(request, {});
});"#;
    let number = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request) { request.Body = 42; return mw.ReturnData(request, {}); });"#;
    for engine in ENGINES {
        let (up, rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "bytes",
            "/bytes/",
            up,
            engine,
            header_only,
            Value::Null,
        );
        js_api(
            dir.path(),
            "number",
            "/number/",
            up,
            engine,
            number,
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        let got = send(
            gw.addr,
            "POST",
            "/bytes/",
            &[("content-type", "application/octet-stream")],
            &body,
        );
        assert_eq!(got.status, StatusCode::OK, "{engine}");
        let seen = rec.last();
        assert_eq!(&seen.body[..], &body[..], "{engine}");
        assert!(
            seen.headers.contains_key("x-seen-length"),
            "{engine}: the script ran"
        );
        let got = send(gw.addr, "POST", "/number/", &[], b"original");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let seen = rec.last();
        assert_eq!(&seen.body[..], b"42", "{engine}: as Tyk's b64enc(42)");
        assert_eq!(seen.headers["content-length"], "2", "{engine}");
        gw.stop();
    }
}
