//! The header and query text a script hands the host is bounded at 1 MiB
//! an answer, on both engines, in every strategy and phase: the real
//! gateway binary on 127.0.0.1:0, one script (`js_fixtures/big_head.js`)
//! naming one string `X-Count` times in the field `X-Field` picks, a
//! recording upstream, the binary's log and `/tyk/stats`.
//!
//! A script holds a string once however often it names it; the host
//! copied it once per name. A QuickJS script naming a 4 MiB string under
//! 3,000 `SetHeaders` names took the whole gateway down (12 GiB asked of
//! the allocator; boa reached 7.5 GiB before its call's timeout).

mod common;
mod js_phases;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::{error_counts, recorder, send, spawn_binary_with, stop_binary, Got};
use js_phases::{fixture, write_phase_apis, PhaseEntries, ENDPOINT_FAILED, STRATEGIES};
use loadgen::bench::probe::Control;
use serde_json::json;

const SECRET: &str = "head-secret";

/// One worker; a generous timeout for a debug build (no timing asserted).
const GATEWAY_ARGS: [&str; 6] = [
    "--threads",
    "1",
    "--secret",
    SECRET,
    "--jsvm-timeout",
    "60s",
];

/// The request-phase fields the script fills, as it and the host's
/// errors name them.
const FIELDS: [&str; 6] = [
    "SetHeaders",
    "DeleteHeaders",
    "AddParams",
    "DeleteParams",
    "ExtendedParams",
    "ResponseHeaders",
];

/// Each value's length: one within the bound (and within a URI's 64 KiB,
/// for the query fields), 25 of them past it (1.25 MB).
const SIZE: usize = 50_000;
const PAST: usize = 25;

/// The phases' APIs ([`write_phase_apis`]) running `bigHead`,
/// `bigResponseHead` and `bigEndpointHead`.
fn write_apis(dir: &std::path::Path, engine: &str, up: SocketAddr) {
    let file = fixture("big_head.js");
    let entries = PhaseEntries {
        file: &file,
        pre: "bigHead",
        response: "bigResponseHead",
        endpoint: "bigEndpointHead",
    };
    write_phase_apis(dir, engine, &format!("http://{up}"), &entries);
}

fn ask(addr: SocketAddr, path: &str, field: &str, count: usize, size: usize) -> Got {
    let (count, size) = (count.to_string(), size.to_string());
    send(
        addr,
        "GET",
        path,
        &[("X-Field", field), ("X-Count", &count), ("X-Size", &size)],
        b"",
    )
}

fn failed(got: &Got, error: &str, what: &str) {
    assert_eq!(got.status, 500, "{what}: {:?}", got.text());
    assert_eq!(got.json(), json!({"error": error}), "{what}");
}

fn heads_are_bounded(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (up, rec) = recorder();
    write_apis(d, engine, up);
    let log = d.join("gateway.log");
    let (child, addr) = spawn_binary_with(d, "127.0.0.1:0", &log, &GATEWAY_ARGS);
    let value = "h".repeat(SIZE);

    for strategy in STRATEGIES {
        let path = format!("/{engine}-{strategy}/x");
        for field in FIELDS {
            let what = format!("{engine} {strategy} {field}");
            let sent = rec.count();
            // Within the bound the answer applies.
            let got = ask(addr, &path, field, 1, SIZE);
            assert_eq!(got.status, 200, "{what} within the bound: {:?}", got.text());
            match field {
                "SetHeaders" => assert_eq!(rec.last().headers["x-big-0"], value, "{what}"),
                "AddParams" => assert!(
                    rec.last().uri.ends_with(&format!("?X-Big-0={value}")),
                    "{what}: {}",
                    rec.last().uri
                ),
                "ExtendedParams" => assert!(
                    rec.last().uri.ends_with(&format!("?x-big={value}")),
                    "{what}: {}",
                    rec.last().uri
                ),
                "ResponseHeaders" => {
                    assert_eq!(got.text(), "forced", "{what}");
                    assert_eq!(got.headers["x-big-0"], value, "{what}");
                }
                _ => {}
            }
            let proxied = usize::from(field != "ResponseHeaders");
            assert_eq!(rec.count(), sent + proxied, "{what}");
            // Past it the request fails closed, nothing proxied.
            let got = ask(addr, &path, field, PAST, SIZE);
            failed(&got, "Internal Server Error", &what);
            assert_eq!(rec.count(), sent + proxied, "{what}: nothing went upstream");
            // The API serves on.
            let got = ask(addr, &path, field, 0, 0);
            assert_eq!(got.status, 200, "{what}: the next request");
        }
    }
    // The case that took the gateway down: one string named thousands of
    // times, 192 MiB if copied; the host stops at the 21st copy.
    let path = format!("/{engine}-persistent/x");
    let sent = rec.count();
    let got = ask(addr, &path, "SetHeaders", 3000, 64 * 1024);
    failed(&got, "Internal Server Error", "3,000 names of one string");
    assert_eq!(rec.count(), sent);
    assert_eq!(ask(addr, &path, "SetHeaders", 1, 5).status, 200);

    // A response hook: the upstream answered, the client gets Tyk's 500
    // for a failed hook.
    let path = format!("/{engine}-resp/x");
    for field in ["SetHeaders", "DeleteHeaders"] {
        let what = format!("{engine} Response.{field}");
        let got = ask(addr, &path, field, 1, SIZE);
        assert_eq!(got.status, 200, "{what} within the bound: {:?}", got.text());
        if field == "SetHeaders" {
            assert_eq!(got.headers["x-big-0"], value, "{what}");
        }
        failed(
            &ask(addr, &path, field, PAST, SIZE),
            "Middleware error",
            &what,
        );
        assert_eq!(ask(addr, &path, field, 0, 0).status, 200, "{what}: next");
    }
    // A virtual endpoint's Response.Headers.
    let path = format!("/{engine}-virt/v");
    let what = format!("{engine} virtual endpoint");
    let got = ask(addr, &path, "", 1, SIZE);
    assert_eq!(got.status, 200, "{what} within the bound: {:?}", got.text());
    assert_eq!(got.headers["x-big-0"], value, "{what}");
    failed(&ask(addr, &path, "", PAST, SIZE), ENDPOINT_FAILED, &what);
    assert_eq!(ask(addr, &path, "", 0, 0).text(), "virtual", "{what}: next");

    // Each refusal is a bad answer, and nothing else failed.
    let control = Control {
        addr,
        secret: SECRET.into(),
    };
    let mut want = BTreeMap::new();
    for strategy in STRATEGIES {
        let n = FIELDS.len() as u64 + u64::from(strategy == "persistent");
        want.insert((format!("{engine}-{strategy}"), "bad_answer".into()), n);
    }
    want.insert((format!("{engine}-resp"), "bad_answer".into()), 2);
    want.insert((format!("{engine}-virt"), "bad_answer".into()), 1);
    assert_eq!(error_counts(&control), want);
    stop_binary(child);

    // One log line per refusal, naming the field and the bound.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "{text}");
    let said = |api: &str, field: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("API {api}: ")) && l.contains("(bad_answer)"))
            // ExtendedParams' values are named by their key.
            .filter(|l| l.contains(&format!("{field}: ")) || l.contains(&format!("{field}[")))
            .filter(|l| l.contains("the answer's header and query names and values"))
            .filter(|l| l.contains("pass 1048576 bytes (1 MiB)"))
            .count()
    };
    for strategy in STRATEGIES {
        let api = format!("{engine}-{strategy}");
        for field in FIELDS {
            let name = match field {
                "ResponseHeaders" => "Request.ReturnOverrides.ResponseHeaders".to_string(),
                f => format!("Request.{f}"),
            };
            let extra = usize::from(strategy == "persistent" && field == "SetHeaders");
            assert_eq!(said(&api, &name), 1 + extra, "{api} {name}:\n{text}");
        }
    }
    let resp = format!("{engine}-resp");
    assert_eq!(said(&resp, "Response.SetHeaders"), 1, "{text}");
    assert_eq!(said(&resp, "Response.DeleteHeaders"), 1, "{text}");
    assert_eq!(
        said(&format!("{engine}-virt"), "Response.Headers"),
        1,
        "{text}"
    );
}

/// boa: every field of every phase and strategy.
#[test]
fn a_script_s_header_text_past_1_mib_fails_its_request_closed_on_boa() {
    heads_are_bounded("boa");
}

/// QuickJS: as on boa.
#[test]
fn a_script_s_header_text_past_1_mib_fails_its_request_closed_on_quickjs() {
    heads_are_bounded("quickjs");
}
