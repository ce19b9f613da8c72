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
    ];
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        for (id, ret, _) in cases {
            js_api(
                dir.path(),
                id,
                &format!("/{id}/"),
                up,
                engine,
                &script(ret),
                Value::Null,
            );
        }
        let gw = gateway(dir.path(), 1, 1);
        for (id, ret, status) in cases {
            let got = get(gw.addr, &format!("/{id}/"));
            assert_eq!(
                got.status.as_u16(),
                status,
                "{engine}: {ret}: {}",
                got.text()
            );
        }
        gw.stop();
    }
}
