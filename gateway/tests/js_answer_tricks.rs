//! Answers that reach the JS host in unusual ways, on every engine and
//! strategy, through the real gateway: whatever the script does, a request
//! it denies is never proxied, an edit it makes is applied or the request
//! fails (500), and no answer leaves the API broken for the next request.
//!
//! Each case was once wrong on boa: a Proxy around the request read as a
//! request without overrides (a 403 proxied as 200), a field redefined as
//! another accessor was read from the host's record instead of the
//! script's getter, a recursing getter read by the host left the context
//! failing every later request, and an informational `ResponseCode` was
//! written as the final answer (the client waited for the real one).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use gateway::config::JsEngine;
use gateway::server::GatewayConfig;
use serde_json::json;

fn api(dir: &Path, target: &str) {
    let path = format!(
        "{}/tests/js_fixtures/answer_tricks.js",
        env!("CARGO_MANIFEST_DIR")
    );
    let mw = json!({ "driver": "otto", "pre": [{ "name": "tricksMw", "path": path }] });
    common::write_api(
        dir,
        "tricks",
        &common::api_json("tricks", "/tricks/", target, true, mw),
    );
}

/// A one-worker gateway serving the fixture in front of a recording
/// upstream, with `config`'s JS settings (its directory kept alive).
fn start(config: GatewayConfig) -> (common::TestGateway, common::Recorder, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (up, rec) = common::recorder();
    api(dir.path(), &format!("http://{up}"));
    let gw = common::start_gateway_with(GatewayConfig {
        apis_dir: dir.path().to_path_buf(),
        threads: 1,
        ..config
    });
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    (gw, rec, dir)
}

/// Runs `scenario` for each engine and strategy ([`start`]; `jsvm_threads`:
/// 1 runs boa on a VM thread, the default; 0 inline).
fn each(jsvm_threads: usize, scenario: impl Fn(&str, &common::TestGateway, &common::Recorder)) {
    for &(engine, strategy) in common::JS_COMBOS {
        let (gw, rec, _dir) = start(GatewayConfig {
            jsvm_strategy: strategy,
            jsvm_engine: engine,
            jsvm_threads,
            ..GatewayConfig::default()
        });
        scenario(&format!("{engine:?} {strategy:?}"), &gw, &rec);
        gw.stop();
    }
}

fn case(gw: &common::TestGateway, which: &str) -> common::Got {
    common::send(
        gw.addr,
        "GET",
        "/tricks/x",
        &[("x-case", which), ("x-drop-me", "1")],
        b"",
    )
}

/// The well-behaved case works: the upstream sees the script's header.
fn works(gw: &common::TestGateway, rec: &common::Recorder, combo: &str) {
    let before = rec.count();
    let got = case(gw, "ok");
    assert_eq!(got.status, 200, "{combo}: {}", got.text());
    assert_eq!(rec.count(), before + 1, "{combo}");
    assert_eq!(rec.last().headers["x-mw"], "ran", "{combo}");
}

#[test]
fn a_proxy_around_the_request_never_lets_a_denied_request_through() {
    each(1, |combo, gw, rec| {
        for _ in 0..3 {
            let got = case(gw, "proxy-deny");
            // QuickJS reads a Proxy as Tyk's JSON would (403); boa cannot
            // reach a Proxy's target and fails the call (500). Never 200.
            let want = if combo.starts_with("Boa") && !combo.ends_with("TykJson") {
                (500, json!({ "error": "Internal Server Error" }))
            } else {
                (403, json!({ "error": "denied" }))
            };
            assert_eq!((got.status.as_u16(), got.json()), want, "{combo}");
            assert_eq!(rec.count(), 0, "{combo}: a denied request was proxied");
        }
        let got = case(gw, "proxy-edit");
        if got.status == 200 {
            let seen = rec.last();
            assert_eq!(seen.headers["x-through-proxy"], "yes", "{combo}");
            assert_eq!(seen.headers["x-mw"], "ran", "{combo}");
            assert!(!seen.headers.contains_key("x-drop-me"), "{combo}");
        } else {
            assert_eq!(got.status, 500, "{combo}: {}", got.text());
        }
        works(gw, rec, combo);
    });
}

#[test]
fn a_field_redefined_as_another_accessor_is_read_through_it() {
    each(1, |combo, gw, rec| {
        let got = case(gw, "redefine-deny");
        assert_eq!(got.status, 403, "{combo}: {}", got.text());
        assert_eq!(got.json(), json!({ "error": "denied" }), "{combo}");
        assert_eq!(rec.count(), 0, "{combo}: a denied request was proxied");
        let got = case(gw, "redefine-sets");
        assert_eq!(got.status, 200, "{combo}: {}", got.text());
        let seen = rec.last();
        assert_eq!(seen.headers["x-from-getter"], "yes", "{combo}");
        // The getter's object replaced the one the script wrote into.
        assert!(!seen.headers.contains_key("x-mw"), "{combo}");
        works(gw, rec, combo);
    });
}

/// A getter that recurses fails its own request; the context serves on
/// (boa: the host's read hits a runtime limit and the context is rebuilt).
#[test]
fn a_recursing_getter_fails_only_its_own_requests() {
    for threads in [1, 0] {
        each(threads, |combo, gw, rec| {
            for which in ["recurse", "recurse-header"] {
                for i in 0..25 {
                    let got = case(gw, which);
                    assert_eq!(got.status, 500, "{combo} {which} #{i}: {}", got.text());
                }
                works(gw, rec, combo);
            }
        });
    }
}

/// A field Tyk decodes into a Go map given an array: Go's decoder refuses
/// it and the request fails, on every engine and strategy (QuickJS read an
/// array as an empty map and proxied the request without the headers).
#[test]
fn a_map_field_given_an_array_fails_the_request() {
    each(1, |combo, gw, rec| {
        for which in [
            "sets-array",
            "params-array",
            "extended-array",
            "ro-headers-array",
        ] {
            let got = case(gw, which);
            assert_eq!(got.status, 500, "{combo} {which}: {}", got.text());
            assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
        }
        assert_eq!(rec.count(), 0, "{combo}: a refused answer was proxied");
        works(gw, rec, combo);
    });
}

/// A function is not an object to Tyk's JSON (`JSON.stringify` drops it):
/// a function as the answer, or as its `Request`, fails the request on
/// every engine and strategy. boa took a function carrying the fields for
/// the object and proxied the request.
#[test]
fn a_function_as_the_answer_or_its_request_fails_the_request() {
    each(1, |combo, gw, rec| {
        for which in ["fn-answer", "fn-request"] {
            let got = case(gw, which);
            assert_eq!(got.status, 500, "{combo} {which}: {}", got.text());
            assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
        }
        assert_eq!(rec.count(), 0, "{combo}: a refused answer was proxied");
        works(gw, rec, combo);
    });
}

/// An informational `ResponseCode` cannot be the answer: written as one,
/// the client waited for the real answer and, on a kept-alive connection,
/// took the next request's for it.
#[test]
fn an_informational_override_code_fails_the_request_on_its_own_connection() {
    each(1, |combo, gw, rec| {
        for code in ["code-100", "code-101", "code-199"] {
            let mut s = TcpStream::connect(gw.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let req = |which: &str| {
                format!("GET /tricks/x HTTP/1.1\r\nHost: t\r\nX-Case: {which}\r\n\r\n")
            };
            // Both requests at once: each answer must be its own.
            s.write_all((req(code) + &req("ok")).as_bytes()).unwrap();
            let (status, body) = common::raw::read_response(&mut s);
            assert_eq!(status, 500, "{combo} {code}: {body}");
            assert!(
                body.contains(r#""error": "Internal Server Error""#),
                "{combo} {code}: {body}"
            );
            let (status, body) = common::raw::read_response(&mut s);
            assert_eq!(status, 200, "{combo} {code}: {body}");
            assert!(body.ends_with("recorded"), "{combo} {code}: {body}");
        }
        assert_eq!(rec.count(), 3, "{combo}: only the well-behaved requests");
    });
}

/// Inline (`--jsvm-threads 0`), boa cannot stop a call inside one native
/// step: the call runs to its end past `--jsvm-timeout`, and its answer
/// must not be used then (it was: a 200 seconds after the deadline).
#[test]
fn an_inline_boa_call_that_ends_past_its_deadline_fails_as_a_timeout() {
    let (gw, rec, _dir) = start(GatewayConfig {
        jsvm_engine: JsEngine::Boa,
        jsvm_threads: 0,
        jsvm_timeout: Duration::from_millis(100),
        ..GatewayConfig::default()
    });
    let got = case(&gw, "slow-regex");
    assert_eq!(got.status, 500, "{}", got.text());
    assert_eq!(got.json(), json!({ "error": "Internal Server Error" }));
    assert_eq!(rec.count(), 0, "a late answer was proxied");
    works(&gw, &rec, "boa inline");
    gw.stop();
}
