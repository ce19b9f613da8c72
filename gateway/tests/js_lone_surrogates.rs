//! A string holding a lone UTF-16 surrogate (a string cut inside an emoji
//! is enough) reaches Tyk's Go side as U+FFFD: goja's conversion, or Go's
//! JSON decoder reading the `\ud83d` escape `JSON.stringify` writes. The
//! same here on both engines and every strategy, in the globals (`log`,
//! `b64enc`, `TykSetKeyData`, `TykMakeHttpRequest`'s JSON) and the answer
//! (a header, the body, `SessionMeta`). QuickJS's host refused every such
//! string (a 500), both engines refused such a `SessionMeta` in
//! `persistent` and `fresh`, and `TykMakeHttpRequest` answered `undefined`
//! for such a JSON text.

mod common;
mod js_tykapi;

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use common::*;
use js_tykapi::*;

const SCRIPT: &str = r#"var mw = new TykJS.TykMiddleware.NewMiddleware({});
mw.NewProcessRequest(function (request, session, spec) {
    var cut = "a\ud83d\ude00b".slice(0, 2);
    log("cut: " + cut);
    rawlog(cut);
    TykSetKeyData("k" + cut, JSON.stringify({meta_data: {c: cut}}), true);
    var r = TykMakeHttpRequest(JSON.stringify({Domain: spec.config_data.svc, Resource: "/call", Headers: {"X-Cut": cut}}));
    request.SetHeaders["X-Cut"] = cut;
    request.SetHeaders["X-Enc"] = b64enc(cut);
    request.SetHeaders["X-Call"] = typeof r;
    request.Body = cut;
    return mw.ReturnData(request, {"cut": cut});
});
"#;

#[test]
fn lone_surrogates_are_u_fffd_on_every_engine_and_strategy() {
    let (svc, calls) = recorder();
    let (up, rec) = recorder();
    let cut = "a\u{fffd}";
    for engine in ENGINES {
        for strategy in ["persistent", "tyk-json", "fresh"] {
            let combo = format!("{engine} {strategy}");
            let dir = tempfile::tempdir().unwrap();
            js_api(
                dir.path(),
                "cut",
                "/cut/",
                up,
                engine,
                SCRIPT,
                json!({"svc": format!("http://{svc}")}),
            );
            let gw = gateway_with(one_vm_thread(
                dir.path(),
                Duration::from_secs(10),
                Some(strategy),
            ));
            let got = get(gw.addr, "/cut/");
            assert_eq!(got.status, StatusCode::OK, "{combo}: {}", got.text());
            let seen = rec.last();
            let header =
                |name: &str| String::from_utf8_lossy(seen.headers[name].as_bytes()).into_owned();
            assert_eq!(header("x-cut"), cut, "{combo}");
            // base64 of "a" and U+FFFD's UTF-8.
            assert_eq!(header("x-enc"), "Ye+/vQ==", "{combo}");
            assert_eq!(header("x-call"), "string", "{combo}");
            assert_eq!(&seen.body[..], cut.as_bytes(), "{combo}");
            let call = calls.last();
            assert_eq!(
                String::from_utf8_lossy(call.headers["x-cut"].as_bytes()),
                cut,
                "{combo}"
            );
            gw.stop();
        }
    }
}
