//! Bodies a native plugin hands the host are bounded as every other body the
//! gateway holds whole (32 MiB): the real gateway binary on 127.0.0.1:0, the
//! C fixture `fixtures/big_body.c`, a recording upstream, and the binary's
//! log.

mod common;

use common::native::plugins;
use common::{api_json, recorder, send, spawn_binary, stop_binary, write_api};
use serde_json::json;

/// The bound: `MAX_BUFFERED_BODY` for a request's body and a plugin's own
/// answer, `MAX_BUFFERED_RESPONSE` for a response's.
const BOUND: usize = 32 << 20;

/// `set_body`, `set_response_body` and `respond` each took a body of any
/// size and copied it (a gigabyte as readily as a byte), where a client's
/// body past 32 MiB is a 413, an upstream's a 500, and a Go handler's or a
/// script's stays within the same bound. A body one byte past it now fails
/// its request closed, even though the plugin ignores the refusal: Tyk's
/// 500 (`Middleware error` in the response phase), nothing of it sent
/// upstream or to the client, and one log line naming the plugin, the
/// callback and the bound. A body exactly at the bound goes whole, and the
/// gateway serves on.
#[test]
fn a_native_body_past_32_mib_fails_its_request_closed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    let t = format!("http://{up}");
    let lib = plugins().big_body.to_str().unwrap().to_string();
    let entry = |name: &str| json!([{"name": name, "path": lib}]);
    let pre = |name: &str| json!({"driver": "goplugin", "pre": entry(name)});
    let resp = json!({"driver": "goplugin", "response": entry("SetResponseBody")});
    write_api(
        d,
        "set",
        &api_json("set", "/set/", &t, true, pre("SetBody")),
    );
    write_api(
        d,
        "answer",
        &api_json("answer", "/answer/", &t, true, pre("Answer")),
    );
    write_api(d, "resp", &api_json("resp", "/resp/", &t, true, resp));
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary(d, "127.0.0.1:0", &log);

    let at = BOUND.to_string();
    let past = (BOUND + 1).to_string();
    // Request phase, run in place (no body) and buffered (a body).
    for (method, body) in [("GET", &b""[..]), ("POST", &b"client's"[..])] {
        let got = send(addr, method, "/set/x", &[("X-Size", &at)], body);
        assert_eq!(got.status, 200, "{method} at the bound: {}", got.text());
        assert_eq!(rec.last().body.len(), BOUND, "{method}");
        let sent = rec.count();
        let got = send(addr, method, "/set/x", &[("X-Size", &past)], body);
        assert_eq!(got.status, 500, "{method} past the bound");
        assert_eq!(got.json(), json!({"error": "Internal Server Error"}));
        assert_eq!(rec.count(), sent, "{method}: nothing went upstream");
    }
    // A plugin's own answer: nothing is proxied either way.
    let got = send(addr, "GET", "/answer/x", &[("X-Size", &at)], b"");
    assert_eq!(got.status, 200);
    assert_eq!(got.body.len(), BOUND);
    let got = send(addr, "GET", "/answer/x", &[("X-Size", &past)], b"");
    assert_eq!(got.status, 500);
    assert_eq!(got.json(), json!({"error": "Internal Server Error"}));
    // Response phase: the upstream answered; the client gets Tyk's 500.
    let got = send(addr, "GET", "/resp/x", &[("X-Size", &at)], b"");
    assert_eq!(got.status, 200);
    assert_eq!(got.body.len(), BOUND);
    let got = send(addr, "GET", "/resp/x", &[("X-Size", &past)], b"");
    assert_eq!(got.status, 500);
    assert_eq!(got.json(), json!({"error": "Middleware error"}));
    // Served on: the worker and the process are fine.
    let got = send(addr, "GET", "/set/x", &[("X-Size", "5")], b"");
    assert_eq!(got.status, 200);
    assert_eq!(rec.last().body, &b"bbbbb"[..]);
    stop_binary(child);

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    let said = |plugin: &str, callback: &str| {
        let want = format!(
            "native plugin {plugin}: {callback}: a body of {past} bytes is past the 32 MiB bound"
        );
        text.lines().filter(|l| l.contains(&want)).count()
    };
    assert_eq!(said("SetBody", "set_body"), 2, "{text}");
    assert_eq!(said("Answer", "respond"), 1, "{text}");
    assert_eq!(said("SetResponseBody", "set_response_body"), 1, "{text}");
    let failed = text
        .lines()
        .filter(|l| l.contains("(plugin_fault)"))
        .count();
    assert_eq!(failed, 4, "{text}");
}
