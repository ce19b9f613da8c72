//! Keys and sessions on both engines through the real gateway: there are
//! none here, so `TykGetKeyData`/`TykSetKeyData` answer as Tyk does for an
//! unknown key, and a script's `Session` is type-checked as Tyk's decoder
//! checks it (a malformed one is a 500).

mod common;
mod js_tykapi;

use serde_json::{json, Value};

use common::*;
use js_tykapi::*;

#[test]
fn key_data_answers_as_tyk_does_for_an_unknown_key() {
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        let script = answering(
            r#"return [JSON.parse(TykGetKeyData("some-key", spec.APIID)),
                       typeof TykSetKeyData("some-key", JSON.stringify({rate: 1}), "1"),
                       typeof TykSetKeyData("some-key", "not json", "0")];"#,
        );
        js_api(
            dir.path(),
            "keys",
            "/keys/",
            up,
            engine,
            &script,
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        assert_eq!(
            get(gw.addr, "/keys/").json(),
            json!([{"status": "error", "message": "Key not found"}, "undefined", "undefined"]),
            "{engine}"
        );
        gw.stop();
    }
}

#[test]
fn a_malformed_session_in_the_answer_is_a_500_as_in_tyk() {
    let script = |ret: &str| {
        format!(
            "var mw = new TykJS.TykMiddleware.NewMiddleware({{}});\nmw.NewProcessRequest(function (request) {{ return {ret}; }});"
        )
    };
    let cases = [
        (
            "notobject",
            "mw.ReturnAuthData(request, \"not a session\")",
            500,
        ),
        (
            "badrate",
            "mw.ReturnAuthData(request, {rate: \"fast\"})",
            500,
        ),
        ("badmeta", "mw.ReturnData(request, {count: 5})", 500),
        (
            "goodsession",
            "mw.ReturnAuthData(request, {rate: 5, meta_data: {n: 1}})",
            200,
        ),
        ("goodmeta", "mw.ReturnData(request, {user: \"moe\"})", 200),
        // Tyk decodes the answer's JSON text: inherited and non-enumerable
        // fields are not in it, so these malformed sessions are not seen.
        (
            "inherited",
            "Object.assign(Object.create({Session: \"x\", AuthValue: 5, SessionMeta: {count: 5}}), {Request: request})",
            200,
        ),
        (
            "hidden",
            "Object.defineProperty(mw.ReturnData(request, {}), \"Session\", {value: \"x\"})",
            200,
        ),
        (
            "getter",
            "Object.defineProperty(mw.ReturnData(request, {}), \"Session\", {get: function () { return \"x\"; }, enumerable: true})",
            500,
        ),
        (
            "proxied",
            "new Proxy(mw.ReturnData(request, {}), {get: function (t, k) { return k === \"Session\" ? \"x\" : t[k]; }})",
            200,
        ),
    ];
    // Every strategy decodes the answer by the same rules: the native
    // reads of `persistent` and `fresh`, and `tyk-json`'s JSON text.
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        for strategy in STRATEGIES {
            for (id, ret, _) in cases {
                let id = format!("{id}-{strategy}");
                js_api(
                    dir.path(),
                    &id,
                    &format!("/{id}/"),
                    up,
                    engine,
                    &script(ret),
                    Value::Null,
                );
                let file = dir.path().join(format!("{id}.json"));
                let mut api: Value =
                    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
                api["custom_middleware"]["strategy"] = json!(strategy);
                write_api(dir.path(), &id, &api);
            }
        }
        let gw = gateway(dir.path(), 1, 1);
        for strategy in STRATEGIES {
            for (id, ret, status) in cases {
                let got = get(gw.addr, &format!("/{id}-{strategy}/"));
                assert_eq!(
                    got.status.as_u16(),
                    status,
                    "{engine} {strategy}: {ret}: {}",
                    got.text()
                );
            }
        }
        gw.stop();
    }
}

const STRATEGIES: [&str; 3] = ["persistent", "tyk-json", "fresh"];
