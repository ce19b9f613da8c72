//! What a script sends with `TykMakeHttpRequest` and `TykBatchRequest` is
//! bounded as every body the gateway holds whole (32 MiB; a batch's bodies
//! together), on both engines: the real gateway binary on 127.0.0.1:0,
//! `js_fixtures/callout_body.js` calling a recording upstream with a body
//! of the size `X-Size` asks for, the binary's log.

mod common;
mod js_phases;

use common::{recorder, send, spawn_binary_with, stop_binary, write_api, Recorder};
use js_phases::js_api;
use serde_json::json;

/// `proxy::MAX_BUFFERED_BODY`.
const BOUND: usize = 32 << 20;

/// The calls out that reached the upstream at `path`, by body length.
fn calls_to(rec: &Recorder, path: &str) -> Vec<usize> {
    rec.requests()
        .iter()
        .filter(|s| s.uri.ends_with(path))
        .map(|s| s.body.len())
        .collect()
}

/// What the script said of its call (`X-Reply`), read from the request it
/// proxied.
fn reply_seen(rec: &Recorder) -> String {
    let last = rec.last();
    assert!(last.uri.contains("/x"), "the proxied request came last");
    last.headers["x-reply"].to_str().unwrap().to_string()
}

fn bounded(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    let js = format!(
        "{}/tests/js_fixtures/callout_body.js",
        env!("CARGO_MANIFEST_DIR")
    );
    let mw = json!({"pre": [{"name": "callout", "path": js}]});
    let mut def = js_api("callout", &format!("http://{up}"), engine, mw);
    def["config_data"] = json!({"upstream": format!("http://{up}")});
    write_api(d, "callout", &def);
    let log = d.join("gateway.log");
    // Room for a 32 MiB string, its JSON text and the host's copy; a
    // debug build's 32 MiB JSON takes a moment (no timing is asserted).
    let (child, addr) = spawn_binary_with(
        d,
        "127.0.0.1:0",
        &log,
        &[
            "--threads",
            "1",
            "--jsvm-memory",
            "256MiB",
            "--jsvm-timeout",
            "60s",
        ],
    );
    let ask = |size: usize, how: &str| {
        let size = size.to_string();
        let got = send(
            addr,
            "GET",
            "/callout/x",
            &[("X-Size", &size), ("X-How", how)],
            b"",
        );
        assert_eq!(got.status, 200, "{engine} {how} {size}: {}", got.text());
    };

    // TykMakeHttpRequest: up to the bound the body goes out whole.
    ask(5, "single");
    assert_eq!(calls_to(&rec, "/single"), [5], "{engine}");
    assert_eq!(reply_seen(&rec), "answered");
    ask(BOUND, "single");
    assert_eq!(calls_to(&rec, "/single"), [5, BOUND], "{engine}");
    assert_eq!(reply_seen(&rec), "answered");
    // Past it nothing is sent: the script gets undefined, as for any call
    // that fails, and its request goes on.
    ask(BOUND + 1, "single");
    assert_eq!(calls_to(&rec, "/single"), [5, BOUND], "{engine}: sent");
    assert_eq!(reply_seen(&rec), "undefined", "{engine}");

    // TykBatchRequest: the batch's bodies together.
    ask(10, "batch");
    assert_eq!(calls_to(&rec, "/batch-a"), [5], "{engine}");
    assert_eq!(calls_to(&rec, "/batch-b"), [5], "{engine}");
    assert_eq!(reply_seen(&rec), "answered");
    ask(BOUND + 1, "batch");
    assert_eq!(calls_to(&rec, "/batch-a"), [5], "{engine}: sent");
    assert_eq!(calls_to(&rec, "/batch-b"), [5], "{engine}: sent");
    assert_eq!(reply_seen(&rec), "undefined", "{engine}");
    stop_binary(child);

    // Each refusal logged once, naming the field and the bound.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    let past = format!("a body of {} bytes is past the 32 MiB bound", BOUND + 1);
    let lines = |start: &str| {
        text.lines()
            .filter(|l| l.contains(start) && l.contains(&past))
            .count()
    };
    assert_eq!(lines("TykMakeHttpRequest: Body: "), 1, "{text}");
    assert_eq!(
        lines("TykBatchRequest: Batch request error: requests[0..=1].body: "),
        1,
        "{text}"
    );
}

/// A script's `TykMakeHttpRequest` body past 32 MiB was sent whole,
/// bounded only by `--jsvm-memory`, where every other body the gateway
/// holds whole is bounded at 32 MiB. Now it is refused before anything is
/// sent: the script gets `undefined` and the log says why; exactly 32 MiB
/// still goes out. A batch's bodies are bounded together.
#[test]
fn a_script_callout_body_past_32_mib_is_not_sent_on_boa() {
    bounded("boa");
}

/// As on boa.
#[test]
fn a_script_callout_body_past_32_mib_is_not_sent_on_quickjs() {
    bounded("quickjs");
}
