//! Middleware failures keep their kind to the end: a real gateway on
//! 127.0.0.1:0 runs real scripts (both JS engines) and the real test
//! plugin library; each failure answers Tyk's 500 and is counted under its
//! kind in `/tyk/stats`, read back by loadgen's own reader. And the one
//! rule for a replaced body's framing: a native plugin and a script that
//! write the same body send the upstream the same headers.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::native::{native_api, plugins, write_def};
use common::{api_json, error_counts, mock, recorder, send, start_gateway_with, write_api};
use gateway::server::GatewayConfig;
use loadgen::bench::probe::Control;
use serde_json::json;

const SECRET: &str = "errors-secret";

fn fixture(name: &str) -> String {
    format!("{}/tests/js_fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A JS API on `engine` whose pre entry `name` is the script at `path`.
fn js_api(id: &str, engine: &str, up: &str, name: &str, path: &str) -> serde_json::Value {
    let mw = json!({"driver": "otto", "engine": engine, "pre": [{"name": name, "path": path}]});
    api_json(id, &format!("/{id}/"), up, true, mw)
}

fn assert_500(got: &common::Got, what: &str) {
    assert_eq!(got.status, 500, "{what}: {}", got.text());
    assert_eq!(
        got.json(),
        json!({"error": "Internal Server Error"}),
        "{what}"
    );
}

#[test]
fn every_failure_is_counted_per_api_under_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://{}", mock());
    for engine in ["boa", "quickjs"] {
        let faults = fixture("faults.js");
        let id = format!("{engine}-faults");
        write_api(
            dir.path(),
            &id,
            &js_api(&id, engine, &up, "faultsMw", &faults),
        );
        let id = format!("{engine}-broken");
        let broken = fixture("syntax_error.js");
        write_api(
            dir.path(),
            &id,
            &js_api(&id, engine, &up, "broken", &broken),
        );
    }
    let lib = &plugins().test;
    let up_addr = up.trim_start_matches("http://");
    for (id, symbol) in [("native-fault", "BadHeaderValue"), ("native-fail", "Fail")] {
        let def = native_api(id, &format!("/{id}/"), up_addr, &[(lib, symbol)], &[]);
        write_def(dir.path(), id, &def);
    }
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 2,
        jsvm_timeout: Duration::from_millis(300),
        jsvm_memory: 32 << 20,
        secret: Some(SECRET.into()),
        ..GatewayConfig::default()
    });
    let control = Control {
        addr: gw.addr,
        secret: SECRET.into(),
    };
    assert!(
        error_counts(&control).is_empty(),
        "{:?}",
        error_counts(&control)
    );

    // Each request fails one way; `n` of each, so counts are not just 1.
    let n = 3;
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut expect = |api: &str, kind: &str| {
        *want.entry((api.to_string(), kind.to_string())).or_default() += n;
    };
    let js_cases = [
        ("throw", "threw"),
        // QuickJS took any error whose text said "out of memory" for its
        // heap limit (`out_of_memory`, the context rebuilt, the log
        // blaming --jsvm-memory).
        ("oom-text", "threw"),
        ("loop", "timed_out"),
        ("crlf", "bad_answer"),
        ("shape", "bad_answer"),
    ];
    for engine in ["boa", "quickjs"] {
        let faults = format!("{engine}-faults");
        for (fault, kind) in js_cases {
            for _ in 0..n {
                let path = format!("/{faults}/x");
                let got = send(gw.addr, "GET", &path, &[("x-fault", fault)], b"");
                assert_500(&got, &format!("{engine} {fault}"));
            }
            expect(&faults, kind);
        }
        let broken = format!("{engine}-broken");
        for _ in 0..n {
            assert_500(&common::get(gw.addr, &format!("/{broken}/x")), &broken);
        }
        expect(&broken, "not_loaded");
        // The API that failed keeps serving.
        let ok = common::get(gw.addr, &format!("/{faults}/x"));
        assert_eq!(ok.status, 200, "{engine}: {}", ok.text());
    }
    // QuickJS has a real heap limit: a runaway allocation stops there.
    for _ in 0..n {
        let got = send(
            gw.addr,
            "GET",
            "/quickjs-faults/x",
            &[("x-fault", "alloc")],
            b"",
        );
        assert_500(&got, "quickjs alloc");
    }
    expect("quickjs-faults", "out_of_memory");
    for (api, kind) in [("native-fault", "plugin_fault"), ("native-fail", "threw")] {
        for _ in 0..n {
            assert_500(&common::get(gw.addr, &format!("/{api}/x")), api);
        }
        expect(api, kind);
    }

    assert_eq!(error_counts(&control), want);
    // The per-call figures are still there beside the counts, and a reset
    // clears both.
    let body = control.stats_body().unwrap();
    assert!(body
        .apis
        .iter()
        .any(|s| s.api_id == "boa-faults" && s.count > 0));
    control.reset().unwrap();
    assert!(error_counts(&control).is_empty());
    gw.stop();
}

/// A chunked POST and a sized POST, each through a native plugin and a
/// script that both replace the body with `rewritten body`, followed by an
/// entry of the same driver that reports the framing headers it sees: the
/// next middleware and the upstream see the same framing from every
/// driver, the body's length and no chunking.
#[test]
fn a_replaced_body_is_framed_alike_by_every_driver() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let script = dir.path().join("rewrite.js");
    std::fs::write(
        &script,
        r#"var rewriteMw = new TykJS.TykMiddleware.NewMiddleware({});
rewriteMw.NewProcessRequest(function (request, session, spec) {
    request.Body = "rewritten body";
    return rewriteMw.ReturnData(request, {});
});
var framingMw = new TykJS.TykMiddleware.NewMiddleware({});
framingMw.NewProcessRequest(function (request, session, spec) {
    var all = function (n) { return (request.Headers[n] || []).join(","); };
    request.SetHeaders["X-Framing"] =
        "cl=" + all("Content-Length") + " te=" + all("Transfer-Encoding");
    return framingMw.ReturnData(request, {});
});"#,
    )
    .unwrap();
    let lib = &plugins().test;
    let entries = [(lib.as_path(), "Rewrite"), (lib.as_path(), "Framing")];
    let def = native_api("native", "/native/", &up.to_string(), &entries, &[]);
    write_def(dir.path(), "native", &def);
    let path = script.to_str().unwrap();
    for engine in ["boa", "quickjs"] {
        let mw = json!({"driver": "otto", "engine": engine, "pre": [
            {"name": "rewriteMw", "path": path},
            {"name": "framingMw", "path": path},
        ]});
        let api = api_json(
            engine,
            &format!("/{engine}/"),
            &format!("http://{up}"),
            true,
            mw,
        );
        write_api(dir.path(), engine, &api);
    }
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let all = |h: &http::HeaderMap, n: &str| -> Vec<String> {
        h.get_all(n)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    };
    let bodies = [
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "Content-Length: 5\r\n\r\nhello",
    ];
    for body in bodies {
        for api in ["native", "boa", "quickjs"] {
            let req = format!("POST /{api}/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n{body}");
            let answer = common::raw(gw.addr, &req);
            assert!(answer.starts_with("HTTP/1.1 200"), "{api}: {answer}");
            let last = rec.last();
            assert_eq!(last.body.as_ref(), b"rewritten body", "{api}");
            // What the next middleware saw, then what the upstream got.
            let framing = all(&last.headers, "x-framing");
            assert_eq!(framing, ["cl=14 te="], "{api} after {body:?}");
            assert_eq!(all(&last.headers, "content-length"), ["14"], "{api}");
            assert!(all(&last.headers, "transfer-encoding").is_empty(), "{api}");
        }
    }
    gw.stop();
}

/// Requests a middleware passes on with the body untouched: the upstream
/// gets Go's framing from every driver. A bodyless GET or DELETE carries
/// no `Content-Length` even when the client sent `0`; a POST carries `0`;
/// a GET with a body carries its length.
#[test]
fn a_passed_on_body_is_framed_as_gos_client_frames_it() {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = recorder();
    let script = dir.path().join("framing.js");
    std::fs::write(
        &script,
        r#"var framingMw = new TykJS.TykMiddleware.NewMiddleware({});
framingMw.NewProcessRequest(function (request, session, spec) {
    var all = function (n) { return (request.Headers[n] || []).join(","); };
    request.SetHeaders["X-Framing"] =
        "cl=" + all("Content-Length") + " te=" + all("Transfer-Encoding");
    return framingMw.ReturnData(request, {});
});"#,
    )
    .unwrap();
    let lib = &plugins().test;
    let def = native_api(
        "native",
        "/native/",
        &up.to_string(),
        &[(lib.as_path(), "Framing")],
        &[],
    );
    write_def(dir.path(), "native", &def);
    let path = script.to_str().unwrap();
    for engine in ["boa", "quickjs"] {
        let mw = json!({"driver": "otto", "engine": engine,
            "pre": [{"name": "framingMw", "path": path}]});
        let api = api_json(
            engine,
            &format!("/{engine}/"),
            &format!("http://{up}"),
            true,
            mw,
        );
        write_api(dir.path(), engine, &api);
    }
    let gw = start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..GatewayConfig::default()
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let all = |h: &http::HeaderMap, n: &str| -> Vec<String> {
        h.get_all(n)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    };
    // (method, framing and body, what the middleware saw, upstream's CL)
    let cases: [(&str, &str, &str, &[&str]); 5] = [
        ("GET", "\r\n", "cl= te=", &[]),
        ("GET", "Content-Length: 0\r\n\r\n", "cl=0 te=", &[]),
        ("DELETE", "Content-Length: 0\r\n\r\n", "cl=0 te=", &[]),
        ("POST", "Content-Length: 0\r\n\r\n", "cl=0 te=", &["0"]),
        ("GET", "Content-Length: 5\r\n\r\nhello", "cl=5 te=", &["5"]),
    ];
    for (method, rest, seen, sent) in cases {
        for api in ["native", "boa", "quickjs"] {
            let req =
                format!("{method} /{api}/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n{rest}");
            let answer = common::raw(gw.addr, &req);
            assert!(answer.starts_with("HTTP/1.1 200"), "{api}: {answer}");
            let last = rec.last();
            let what = format!("{api}: {method} {rest:?}");
            assert_eq!(all(&last.headers, "x-framing"), [seen], "{what}");
            assert_eq!(all(&last.headers, "content-length"), sent, "{what}");
            assert!(all(&last.headers, "transfer-encoding").is_empty(), "{what}");
        }
    }
    gw.stop();
}
