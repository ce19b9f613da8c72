//! Bodies a wasm module hands the host are bounded as every other body the
//! gateway holds whole (32 MiB): the real gateway binary on 127.0.0.1:0,
//! the module `wasm_fixtures/big_body.wat`, a recording upstream, the
//! binary's log and `/tyk/stats`.
#![cfg(feature = "wasm")]

mod common;
mod wasm_common;

use std::collections::BTreeMap;

use common::{error_counts, recorder, send, spawn_binary_with, stop_binary, write_api, Got};
use loadgen::bench::probe::Control;
use serde_json::json;
use wasm_common::{fixture, wasm_api};

/// `MAX_BUFFERED_BODY`.
const BOUND: usize = 32 << 20;

const SECRET: &str = "wasm-bodies-secret";

/// `proxy_set_buffer_bytes` and `proxy_send_local_response` copied a body
/// of any size the module's memory could hold (up to `--wasm-memory`),
/// where a client's body past 32 MiB is a 413 and a native plugin's or a
/// script's a 500. A body one byte past the bound now traps the call, even
/// though the module ignores the status: Tyk's 500, a plugin fault,
/// nothing of it sent upstream or to the client, and one log line naming
/// the host function and the bound. A body exactly at the bound goes whole,
/// and the next request is served (by the fresh instance a trap leaves).
#[test]
fn a_wasm_body_past_32_mib_fails_its_request_closed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    let module = fixture("big_body.wat");
    write_api(
        d,
        "big",
        &wasm_api("big", "/big/", &up.to_string(), &[(&module, "Big")]),
    );
    let log = d.join("gateway.log");
    let args = ["--threads", "1", "--secret", SECRET];
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &args);

    let ask = |call: &str, size: usize, body: &[u8]| -> Got {
        let size = size.to_string();
        let method = if body.is_empty() { "GET" } else { "POST" };
        send(
            addr,
            method,
            "/big/x",
            &[("x-call", call), ("x-size", &size)],
            body,
        )
    };
    let failed = |got: &Got, sent: usize, what: &str| {
        // (Not the body: one at the bound is 32 MiB.)
        assert_eq!(got.status, 500, "{what}: {} bytes", got.body.len());
        assert_eq!(
            got.json(),
            json!({"error": "Internal Server Error"}),
            "{what}"
        );
        assert_eq!(rec.count(), sent, "{what}: nothing went upstream");
    };
    // The request's body, with none from the client and with one.
    for client in [&b""[..], &b"client's"[..]] {
        let what = format!("proxy_set_buffer_bytes over {} bytes", client.len());
        let got = ask("set", BOUND, client);
        assert_eq!(got.status, 200, "{what} at the bound: {}", got.text());
        assert_eq!(rec.last().body.len(), BOUND, "{what}");
        let sent = rec.count();
        failed(&ask("set", BOUND + 1, client), sent, &what);
        let got = ask("set", 5, client);
        assert_eq!(got.status, 200, "{what}: the next request");
        assert_eq!(rec.last().body, &b"wwwww"[..], "{what}");
    }
    // The module's own answer: nothing is proxied either way.
    let what = "proxy_send_local_response";
    let sent = rec.count();
    let got = ask("local", BOUND, b"");
    assert_eq!(got.status, 200, "{what} at the bound: {}", got.text());
    assert_eq!(got.body.len(), BOUND, "{what}");
    failed(&ask("local", BOUND + 1, b""), sent, what);
    let got = ask("local", 5, b"");
    assert_eq!((got.status.as_u16(), got.text()), (200, "wwwww".into()));
    assert_eq!(rec.count(), sent, "{what}");

    let control = Control {
        addr,
        secret: SECRET.into(),
    };
    assert_eq!(
        error_counts(&control),
        BTreeMap::from([(("big".into(), "plugin_fault".into()), 3)])
    );
    stop_binary(child);

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    let said = |call: &str| {
        let want = format!(
            "{call}: a body of {} bytes is past the 32 MiB bound",
            BOUND + 1
        );
        text.lines()
            .filter(|l| l.contains("wasm plugin Big") && l.contains(&want))
            .count()
    };
    assert_eq!(said("proxy_set_buffer_bytes"), 2, "{text}");
    assert_eq!(said("proxy_send_local_response"), 1, "{text}");
}
